#pragma once
// tjit's switches from the environment, read the runtime's way, for code outside the runtime (the
// kit's plans, operator libraries) that has switches of its own.

namespace tjit {

// Whether the environment variable `name` is set to 0, off, OFF, false or no (unset: false).
bool switched_off(const char* name);

// TJIT_LOG_COMPILES: whether tjit logs one line per compile, tuning or Python start. On unless
// "0"; read once per process.
bool log_compiles();

}  // namespace tjit
