"""Make a small real MXNet 1.9.1 profile of a Gluon training loop (see README.md)."""
import mxnet as mx
from mxnet import autograd, gluon, nd
mx.random.seed(0)
mx.profiler.set_config(profile_all=True, aggregate_stats=True, continuous_dump=False,
                       filename="mxnet_profile.json")
net = gluon.nn.Sequential()
net.add(gluon.nn.Dense(16, activation="relu"), gluon.nn.Dense(2))
net.initialize(mx.init.Xavier())
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
x = nd.random.normal(shape=(32, 8)); y = nd.array([i % 2 for i in range(32)])
net(x).wait_to_read()
mx.profiler.set_state("run")
for step in range(3):
    with autograd.record():
        loss = loss_fn(net(x), y)
    loss.backward()
    trainer.step(32)
    nd.waitall()
mx.profiler.set_state("stop")
# MXNet's own aggregate table (op counts); MXNet 1.9.1 writes the trace file itself at
# interpreter exit (an explicit dump() after stop raises "Profiler hasn't been run").
with open("mxnet_aggregate.json", "w") as f:
    f.write(mx.profiler.dumps(reset=False, format="json"))
