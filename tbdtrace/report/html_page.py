"""The HTML report's own style and scripts, inlined into every page (no network).

``GUARD`` runs first and records uncaught errors, and resources that fail to load (it
listens in the capture phase), on ``<html data-js-errors>``, so a test reading the DOM
sees a failure of the main script or a fetch the page should not make. ``SCRIPT`` makes
tables sortable (click a heading; numbers sort by value, text alphabetically) and, once the
page is laid out, counts the drawn data elements of every plot: ``<figure data-points=N>`` and
``<body data-plots-drawn="drawn/total" data-report-ready="1">``, and the milliseconds from
navigation start to then as ``data-ready-ms``. It also makes the step timeline zoom
(:mod:`tbdtrace.report.timeline_svg`): the wheel zooms around the pointer, a drag pans,
a double click or the button shows the whole step; the shown range, in microseconds
from the step's start, is on ``<div class="timeline" data-view-us="a b">``.
"""

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#222}
header{background:#1f2d3d;color:#fff;padding:14px 24px}
header h1{font-size:20px;margin:0 0 4px}
header .meta{font-size:12px;opacity:.85}
nav{padding:6px 24px;background:#eef2f6;font-size:12px;position:sticky;top:0;z-index:2}
nav a{margin-right:10px;color:#1f4d7a;text-decoration:none}
main{padding:12px 24px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:8px 0 16px}
.card{border:1px solid #d8dee6;border-radius:6px;padding:8px 12px;min-width:130px}
.card .v{font-size:18px;font-weight:600}
.card .k{font-size:11px;color:#556}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:14px}
figure.plot{margin:0;border:1px solid #e1e5ea;border-radius:6px;padding:6px;background:#fff}
figure.plot svg{max-width:100%;height:auto}
figure.plot.wide{grid-column:1/-1}
.note{color:#8a5a00;font-size:12px}
h2{font-size:16px;margin:22px 0 6px;border-bottom:1px solid #d8dee6}
h3{font-size:13px;margin:12px 0 4px;color:#334}
table{border-collapse:collapse;font-size:12px;margin:4px 0 10px}
th,td{border:1px solid #e1e5ea;padding:2px 6px;white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f3f5f8;position:sticky;top:26px}
table.sortable th{cursor:pointer}
th.asc:after{content:" \\25B2"}th.desc:after{content:" \\25BC"}
td.s{max-width:520px;overflow:hidden;text-overflow:ellipsis}
details summary{cursor:pointer;font-size:12px;color:#1f4d7a}
h4{font-size:12px;margin:10px 0 3px;color:#445}
p.what{margin:0 0 4px;font-size:12px;color:#556}
.scroll{max-height:430px;overflow:auto;display:inline-block;max-width:100%;margin:0 0 6px}
.scroll table{margin:0}.scroll th{top:0}
nav .more{opacity:.75}
.timeline svg.tl{max-width:100%;height:auto;cursor:grab;user-select:none}
.timeline .tl-data rect{vector-effect:non-scaling-stroke;stroke-width:.5px}
.timeline .tl-head{font-size:12px;margin:2px 0 4px}
.timeline .legend{font-size:11px}.timeline .key{margin-right:10px}
.timeline .key i{display:inline-block;width:10px;height:10px;margin-right:3px}
"""

GUARD = """
(function(){var n=0;window.addEventListener('error',function(e){n+=1;
var what=e.message||('failed to load '+((e.target&&(e.target.src||e.target.href))||'?'));
document.documentElement.setAttribute('data-js-errors',String(n));
document.documentElement.setAttribute('data-js-error-last',String(what));},true);})();
"""

SCRIPT = """
(function(){
function val(td){var v=td.getAttribute('data-v');return v===null?td.textContent:v;}
function sortBy(table,col,th){
  var body=table.tBodies[0];var rows=Array.prototype.slice.call(body.rows);
  var asc=!th.classList.contains('asc');
  Array.prototype.forEach.call(th.parentNode.cells,function(c){c.classList.remove('asc','desc');});
  th.classList.add(asc?'asc':'desc');
  var num=rows.every(function(r){var v=val(r.cells[col]);return v===''||!isNaN(Number(v));});
  rows.sort(function(a,b){
    var x=val(a.cells[col]),y=val(b.cells[col]);
    if(num){x=x===''?-Infinity:Number(x);y=y===''?-Infinity:Number(y);return asc?x-y:y-x;}
    return asc?x.localeCompare(y):y.localeCompare(x);});
  rows.forEach(function(r){body.appendChild(r);});
}
document.querySelectorAll('table.sortable').forEach(function(t){
  Array.prototype.forEach.call(t.tHead.rows[0].cells,function(th,i){
    th.addEventListener('click',function(){sortBy(t,i,th);});});});
function countPlots(){
  var figs=document.querySelectorAll('figure.plot'),ok=0;
  figs.forEach(function(f){var n=0;
    f.querySelectorAll('[id*="tbd-data"]').forEach(function(g){
      g.querySelectorAll('path,use,rect,polygon,polyline').forEach(function(p){
        var b=p.getBBox();if(b.width>0||b.height>0){n+=1;}});});
    f.setAttribute('data-points',String(n));if(n>0){ok+=1;}});
  document.body.setAttribute('data-plots-drawn',ok+'/'+figs.length);
  document.body.setAttribute('data-ready-ms',String(Math.round(performance.now())));
  document.body.setAttribute('data-report-ready','1');
}
function ticks(lo,hi){var span=hi-lo;if(span<=0){return [lo];}var raw=span/8;
  var mag=Math.pow(10,Math.floor(Math.log10(raw))),step=mag*10;
  [1,2,5,10].some(function(m){if(m*mag>=raw){step=m*mag;return true;}return false;});
  var out=[],first=Math.ceil(lo/step)*step;for(var t=first;t<=hi+step*1e-9;t+=step){out.push(t);}
  return out;}
document.querySelectorAll('.timeline').forEach(function(box){
  var svg=box.querySelector('svg.tl'),data=box.querySelector('svg.tl-data'),
      axis=box.querySelector('g.tl-axis');
  var full=Number(box.getAttribute('data-dur-us')),h=data.viewBox.baseVal.height,
      px=Number(axis.getAttribute('data-width')),x0=0,x1=full,drag=null;
  var NS='http://www.w3.org/2000/svg';
  function show(a,b){var w=b-a,min=full/1e6||1e-3;
    if(w<min){var c=(a+b)/2;a=c-min/2;b=c+min/2;w=min;}
    if(w>=full){a=0;b=full;}else{if(a<0){b-=a;a=0;}if(b>full){a-=b-full;b=full;}}
    x0=a;x1=b;data.setAttribute('viewBox',a+' 0 '+(b-a)+' '+h);
    while(axis.firstChild){axis.removeChild(axis.firstChild);}
    var dec=Math.max(0,Math.min(6,-Math.floor(Math.log10((b-a)/8e3))+1));
    ticks(a,b).forEach(function(t){var g=document.createElementNS(NS,'g');
      g.setAttribute('transform','translate('+((t-a)/(b-a)*px).toFixed(2)+',0)');
      var l=document.createElementNS(NS,'line');l.setAttribute('y2','5');
      l.setAttribute('stroke','#556');
      var s=document.createElementNS(NS,'text');s.setAttribute('y','17');
      s.setAttribute('text-anchor','middle');s.textContent=String(+(t/1e3).toFixed(dec));
      g.appendChild(l);g.appendChild(s);axis.appendChild(g);});
    box.setAttribute('data-view-us',a+' '+b);}
  function at(ev){var r=data.getBoundingClientRect();
    return x0+(ev.clientX-r.left)/(r.width||1)*(x1-x0);}
  data.addEventListener('wheel',function(ev){ev.preventDefault();
    var c=at(ev),f=Math.pow(1.0015,ev.deltaY);show(c-(c-x0)*f,c+(x1-c)*f);},{passive:false});
  svg.addEventListener('mousedown',function(ev){drag={x:ev.clientX,a:x0,b:x1};});
  window.addEventListener('mousemove',function(ev){if(!drag){return;}
    var r=data.getBoundingClientRect(),d=(ev.clientX-drag.x)/(r.width||1)*(drag.b-drag.a);
    show(drag.a-d,drag.b-d);});
  window.addEventListener('mouseup',function(){drag=null;});
  svg.addEventListener('dblclick',function(){show(0,full);});
  box.querySelector('.tl-reset').addEventListener('click',function(){show(0,full);});
  show(0,full);
});
if(document.readyState==='complete'){countPlots();}else{window.addEventListener('load',countPlots);}
})();
"""
