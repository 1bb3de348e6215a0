#include "fused_ops/cross_entropy.h"

#include "fused_ops/dispatch.h"

namespace hfta {

static void check_cross_entropy_sizes(const CrossEntropyParams& p) {
  HFTA_CHECK(p.B > 0 && p.N > 0 && p.K > 0,
             "cross-entropy sizes must be positive, got B={} N={} K={}", p.B, p.N, p.K);
}

void check_cross_entropy_labels(const CrossEntropyParams& p, const IndexView& labels) {
  check_shape(labels, p.labels_shape(), "cross-entropy labels");
  HFTA_CHECK(labels.device == Device::kCpu,
             "check_cross_entropy_labels reads the labels on the host, but they are on the {}: "
             "pass a host copy",
             device_name(labels.device));
  for (int64_t n = 0; n < p.N; ++n) {
    if (p.ignored(labels.data[n])) continue;
    HFTA_CHECK(labels.data[n] >= 0 && labels.data[n] < p.K,
               "cross-entropy label {} at row {} is outside [0, K={}){}: labels must be class "
               "indices below the model's number of classes",
               labels.data[n], n, p.K,
               p.ignore_index ? fmt::format(" and is not ignore_index={}", *p.ignore_index)
                              : std::string());
  }
}

// Labels in device memory are checked by the CUDA op, on a host copy (fused_ops/cuda/).
static void check_labels(const CrossEntropyParams& p, const IndexView& labels) {
  check_shape(labels, p.labels_shape(), "cross-entropy labels");
  if (labels.device == Device::kCpu) check_cross_entropy_labels(p, labels);
}

int64_t cross_entropy_target_rows(const CrossEntropyParams& p, const IndexView& labels) {
  check_shape(labels, p.labels_shape(), "cross-entropy labels");
  HFTA_CHECK(labels.device == Device::kCpu,
             "cross_entropy_target_rows reads the labels on the host, but they are on the {}: "
             "pass a host copy",
             device_name(labels.device));
  int64_t rows = 0;
  for (int64_t n = 0; n < p.N; ++n) rows += !p.ignored(labels.data[n]);
  return rows;
}

void check_cross_entropy(const CrossEntropyParams& p, const CrossEntropyForwardArgs& a) {
  check_cross_entropy_sizes(p);
  check_shape(a.logits, p.logits_shape(), "cross-entropy logits");
  check_shape(a.losses, p.losses_shape(), "cross-entropy losses");
  check_shape(a.saved.probs, p.logits_shape(), "cross-entropy saved probs");
  check_device(a.labels, a.logits.device, "cross-entropy labels");
  check_device(a.losses, a.logits.device, "cross-entropy losses");
  check_device(a.saved.probs, a.logits.device, "cross-entropy saved probs");
  check_labels(p, a.labels);
}

void check_cross_entropy_backward(const CrossEntropyParams& p, const CrossEntropyBackwardArgs& a) {
  check_cross_entropy_sizes(p);
  check_shape(a.saved.probs, p.logits_shape(), "cross-entropy saved probs");
  check_shape(a.dlosses, p.losses_shape(), "cross-entropy loss gradient");
  check_shape(a.dlogits, p.logits_shape(), "cross-entropy logits gradient");
  check_device(a.saved.probs, a.dlogits.device, "cross-entropy saved probs");
  check_device(a.labels, a.dlogits.device, "cross-entropy labels");
  check_device(a.dlosses, a.dlogits.device, "cross-entropy loss gradient");
  check_labels(p, a.labels);
}

void check_count_correct(const CrossEntropyParams& p, const CountCorrectArgs& a) {
  check_cross_entropy_sizes(p);
  check_shape(a.logits, p.logits_shape(), "count_correct logits");
  HFTA_CHECK(static_cast<int64_t>(a.correct.size()) == p.B,
             "count_correct got room for {} counts, expected B={} (one per model)",
             a.correct.size(), p.B);
  check_device(a.labels, a.logits.device, "count_correct labels");
  check_labels(p, a.labels);
}

void cross_entropy_forward(const CrossEntropyParams& p, const CrossEntropyForwardArgs& a) {
  check_cross_entropy(p, a);
  HFTA_DISPATCH_CUDA("cross_entropy_forward", a.logits.device, cpu::cross_entropy_forward(p, a),
                     cuda::cross_entropy_forward(p, a));
}

void cross_entropy_backward(const CrossEntropyParams& p, const CrossEntropyBackwardArgs& a) {
  check_cross_entropy_backward(p, a);
  HFTA_DISPATCH_CUDA("cross_entropy_backward", a.dlogits.device, cpu::cross_entropy_backward(p, a),
                     cuda::cross_entropy_backward(p, a));
}

void count_correct(const CrossEntropyParams& p, const CountCorrectArgs& a) {
  check_count_correct(p, a);
  HFTA_DISPATCH_CUDA("count_correct", a.logits.device, cpu::count_correct(p, a),
                     cuda::count_correct(p, a));
}

}  // namespace hfta
