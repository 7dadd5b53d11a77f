// The one libtorch fact tch does not expose: how many tensors share a tensor's storage.
// The loader recycles a batch buffer only when its own handle is the storage's last user
// (see src/slots.rs), so a tensor the training loop keeps is never written again.
#include <ATen/core/Tensor.h>

extern "C" long tessera_storage_use_count(const at::Tensor *t) {
  if (t == nullptr || !t->defined() || !t->has_storage()) {
    return -1;
  }
  return static_cast<long>(t->storage().use_count());
}
