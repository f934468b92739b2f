"""The HTML report's own style and scripts, inlined into every page (no network).

``GUARD`` runs first and records uncaught errors, and resources that fail to load (it
listens in the capture phase), on ``<html data-js-errors>``, so a test reading the DOM
sees a failure of the main script or a fetch the page should not make. ``SCRIPT`` makes
tables sortable (click a heading; numbers sort by value, text alphabetically) and, once the
page is laid out, counts the drawn data elements of every plot: ``<figure data-points=N>`` and
``<body data-plots-drawn="drawn/total" data-report-ready="1">``, and the milliseconds from
navigation start to then as ``data-ready-ms``.
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
if(document.readyState==='complete'){countPlots();}else{window.addEventListener('load',countPlots);}
})();
"""
