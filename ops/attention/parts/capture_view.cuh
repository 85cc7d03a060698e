#pragma once
// A captured tensor as the caller's modifiers see it: the modifiers' struct (rendered by the
// host, attention/modifiers/score_modifiers.cpp) opens each CaptureTable slot as a CaptureView of
// the capture's element type and rank under the caller's name, so `doc[q_idx]` or
// `bias[h][q_idx - kv_idx + 128]` reads the tensor through its strides. Reads go through
// load_global, so the emulator checks each against the capture's bounds; on a GPU an index
// outside the tensor is the caller's bug.
#include "attention/parts/captures.cuh"
#include "attention/parts/dual_number.cuh"
#include "tile/memory.cuh"

namespace flashjit {

/// A Rank-dimensional view of a capture of Element (half_t, bfloat16_t, float or int):
/// view[i] drops the first dimension; the last one reads the element (float, or int).
template <class Element, int Rank>
struct CaptureView {
  const Element* data;
  index_t strides[Rank];

  FJ_DEVICE explicit CaptureView(const CaptureSlot& slot)
      : data(static_cast<const Element*>(slot.data)) {
    for (int d = 0; d < Rank; ++d) strides[d] = slot.strides[d];
  }
  FJ_DEVICE CaptureView(const Element* at, const index_t* rest) : data(at) {
    for (int d = 0; d < Rank; ++d) strides[d] = rest[d];
  }
  FJ_DEVICE CaptureView<Element, Rank - 1> operator[](long long i) const {
    return {data + i * strides[0], strides + 1};
  }
};

/// Element `index` of a capture: a float one widened to fp32, an int32 one as int.
template <class Element>
FJ_DEVICE float capture_load(const Element* data, index_t index) {
  return load_global(data, index);
}
FJ_DEVICE int capture_load(const int* data, index_t index) {
  return load_global_index(data, index);
}

template <class Element>
struct CaptureView<Element, 1> {
  const Element* data;
  index_t stride;

  FJ_DEVICE explicit CaptureView(const CaptureSlot& slot)
      : data(static_cast<const Element*>(slot.data)), stride(slot.strides[0]) {}
  FJ_DEVICE CaptureView(const Element* at, const index_t* rest) : data(at), stride(rest[0]) {}
  FJ_DEVICE auto operator[](long long i) const { return capture_load(data, i * stride); }
};

/// A capture read for its gradient: as CaptureView, but the element comes back as a dual
/// number of slope 1 and its offset is recorded, so that evaluating score_mod on it gives
/// ∂score_mod/∂element and where that element is (attention/parts/modifiers.cuh adds dS times the
/// slope into the capture's gradient there).
template <class Element, int Rank>
struct RecordingView {
  const Element* data;
  index_t offset;
  index_t strides[Rank];
  index_t* record;

  FJ_DEVICE RecordingView(const CaptureSlot& slot, index_t* read)
      : data(static_cast<const Element*>(slot.data)), offset(0), record(read) {
    for (int d = 0; d < Rank; ++d) strides[d] = slot.strides[d];
  }
  FJ_DEVICE RecordingView(const Element* base, index_t at, const index_t* rest, index_t* read)
      : data(base), offset(at), record(read) {
    for (int d = 0; d < Rank; ++d) strides[d] = rest[d];
  }
  FJ_DEVICE RecordingView<Element, Rank - 1> operator[](long long i) const {
    return {data, offset + i * strides[0], strides + 1, record};
  }
};

template <class Element>
struct RecordingView<Element, 1> {
  const Element* data;
  index_t offset;
  index_t stride;
  index_t* record;

  FJ_DEVICE RecordingView(const CaptureSlot& slot, index_t* read)
      : data(static_cast<const Element*>(slot.data)),
        offset(0),
        stride(slot.strides[0]),
        record(read) {}
  FJ_DEVICE RecordingView(const Element* base, index_t at, const index_t* rest, index_t* read)
      : data(base), offset(at), stride(rest[0]), record(read) {}
  FJ_DEVICE Dual<float> operator[](long long i) const {
    *record = offset + i * stride;
    return Dual<float>(load_global(data, *record), 1.0f);
  }
};

}  // namespace flashjit
