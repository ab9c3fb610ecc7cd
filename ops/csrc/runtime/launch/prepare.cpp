#include <tjit/prepare.h>

namespace tjit {
namespace {
thread_local bool prepare_only_now = false;
}  // namespace

PrepareOnlyScope::PrepareOnlyScope(bool prepare_only) : previous_(prepare_only_now) {
  prepare_only_now = prepare_only;
}

PrepareOnlyScope::~PrepareOnlyScope() { prepare_only_now = previous_; }

bool preparing_only() { return prepare_only_now; }

}  // namespace tjit
