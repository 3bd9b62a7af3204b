//===- SavedSlots.cpp - values kept from a forward to its backward ---------===//
//
// pipe_save / pipe_restore: numbered slots per (stage, micro-batch). A saved
// value's storage is charged to SAVED while a slot holds it, which is what the
// memory model charges per micro-batch in flight; pipe_step_end checks that
// every slot was taken back.
//
//===----------------------------------------------------------------------===//
#include "Internal.h"
#include "Rank.h"
#include "Tensor.h"

using namespace piperun;

namespace piperun {

void checkSlotsEmpty(pipe_rank *r) {
  if (r->saved.empty())
    return;
  const auto &[key, tensor] = *r->saved.begin();
  fail(r,
       "step %lld ended with %zu saved value(s) never restored, first: stage %d, "
       "micro-batch %d, slot %d (%s)",
       static_cast<long long>(r->step), r->saved.size(), std::get<0>(key), std::get<1>(key),
       std::get<2>(key), describe(tensor).c_str());
}

} // namespace piperun

static void checkSlot(pipe_rank *r, int32_t stage, int32_t microbatch, int32_t slot,
                      const char *what) {
  auto it = r->stageSlots.find(stage);
  if (it == r->stageSlots.end())
    fail(r, "%s: stage %d is not declared on this rank", what, stage);
  if (slot < 0 || slot >= it->second)
    fail(r, "%s: slot %d of stage %d (it declared %d)", what, slot, stage, it->second);
  // A standalone rank has no micro-batch count to check against.
  if (microbatch < 0 || (r->transport && microbatch >= r->settings.microbatches))
    fail(r, "%s: micro-batch %d of stage %d (the run has %d)", what, microbatch, stage,
         r->settings.microbatches);
}

extern "C" {

void pipe_declare_stage(pipe_rank *r, int32_t stage, int32_t slots) {
  if (stage < 0 || slots < 0)
    fail(r, "pipe_declare_stage: stage %d with %d slots", stage, slots);
  if (!r->stageSlots.emplace(stage, slots).second)
    fail(r, "pipe_declare_stage: stage %d is declared twice", stage);
}

void pipe_save(pipe_rank *r, int32_t stage, int32_t microbatch, int32_t slot, pipe_tensor *t) {
  TensorBox *box = boxOf(r, t, "pipe_save");
  checkSlot(r, stage, microbatch, slot, "pipe_save");
  if (box->borrowed)
    fail(r, "pipe_save: %s is a parameter; a backward reads it with pipe_param",
         describe(t).c_str());
  if (box->inSlot)
    fail(r, "pipe_save: %s is already in a saved slot", describe(t).c_str());
  auto [it, added] = r->saved.emplace(std::make_tuple(stage, microbatch, slot), t);
  if (!added)
    fail(r, "pipe_save: slot %d of stage %d, micro-batch %d is taken (by %s)", slot, stage,
         microbatch, describe(it->second).c_str());
  box->inSlot = true;
  auto *storage = static_cast<Storage *>(t->storage);
  // A computed or received value becomes SAVED; a view of a parameter or a
  // constant keeps its category (its bytes exist whether saved or not).
  if (storage->savedSlots++ == 0 &&
      (storage->category == PIPE_MEM_WORKSPACE || storage->category == PIPE_MEM_COMM))
    recategorize(r->memory, storage, PIPE_MEM_SAVED);
}

pipe_tensor *pipe_restore(pipe_rank *r, int32_t stage, int32_t microbatch, int32_t slot) {
  checkSlot(r, stage, microbatch, slot, "pipe_restore");
  auto it = r->saved.find(std::make_tuple(stage, microbatch, slot));
  if (it == r->saved.end())
    fail(r, "pipe_restore: slot %d of stage %d, micro-batch %d is empty", slot, stage, microbatch);
  pipe_tensor *t = it->second;
  r->saved.erase(it);
  reinterpret_cast<TensorBox *>(t)->inSlot = false;
  // It stays SAVED until the backward frees it: the memory model keeps a
  // micro-batch's saved activations from its forward to the end of its backward.
  --static_cast<Storage *>(t->storage)->savedSlots;
  return t;
}

} // extern "C"
