// Deterministic mode (`--deterministic`): every op gives model b the same bits whatever the
// number of models sharing the call, the execution plan and the thread count. Each reduction runs
// in one fixed order per model (the order of one model computed on one thread), so a model of an
// array equals the same model trained alone bit for bit. Off by default: some ops are faster when
// the threads split a model's reductions (oneDNN's convolution weight gradients, for one) or when
// B models share one grouped kernel. docs/design.md ("Deterministic mode") lists what each op does.
#pragma once

namespace hfta {

// Set once at start-up (or between runs); plan workers only read it.
void set_deterministic(bool on);
bool deterministic();

}  // namespace hfta
