#include "fused_ops/attention.h"

#include <cmath>
#include <limits>
#include <vector>

namespace hfta {
namespace ref {

namespace {

// Whether key t of sequence s is padded (either mask type; none: no key is).
bool padded(const AttentionForwardArgs& a, int64_t T, int64_t s, int64_t t) {
  if (!a.key_padding.empty()) return a.key_padding.data[s * T + t] != 0;
  if (!a.key_padding_u8.empty()) return a.key_padding_u8.data[s * T + t] != 0;
  return false;
}

// Offsets of model b, sequence s: its first qkv/out row, its head h's probs block.
struct Problem {
  const float *q, *k, *v;  // row stride 3D
  int64_t row0;            // first row of [B*n*T, ...] tensors
  int64_t probs0;          // first element of the [T, T] probs block
};

Problem problem(const AttentionParams& p, const float* qkv, int64_t b, int64_t s, int64_t h) {
  const int64_t row0 = (b * p.n + s) * p.T, dh = p.head_dim();
  const float* q = qkv + row0 * 3 * p.D + h * dh;
  return {q, q + p.D, q + 2 * p.D, row0, ((b * p.n + s) * p.H + h) * p.T * p.T};
}

}  // namespace

// The specification: B independent single-model attentions, each head of each sequence on its
// own, in double; model b's dropout mask drawn from streams[b] over its [n, H, T, T] in order.
void attention_forward(const AttentionParams& p, const AttentionForwardArgs& a) {
  check_attention(p, a);
  const int64_t T = p.T, D = p.D, dh = p.head_dim(), ld = 3 * D;
  const double scale = p.score_scale();
  const double minus_inf = -std::numeric_limits<double>::infinity();
  std::vector<double> row(static_cast<size_t>(T)), probs(static_cast<size_t>(T));
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t s = 0; s < p.n; ++s)
      for (int64_t h = 0; h < p.H; ++h) {
        const Problem pr = problem(p, a.qkv.data, b, s, h);
        for (int64_t t = 0; t < T; ++t) {
          double m = minus_inf;
          for (int64_t u = 0; u < T; ++u) {
            double dot = 0.0;
            for (int64_t d = 0; d < dh; ++d) dot += double(pr.q[t * ld + d]) * pr.k[u * ld + d];
            const bool masked = padded(a, T, s, u) || (p.causal && u > t);
            row[u] = masked ? minus_inf : dot * scale;
            if (!masked) m = std::isnan(row[u]) || row[u] > m ? row[u] : m;
          }
          double sum = 0.0;
          for (int64_t u = 0; u < T; ++u) sum += row[u] == minus_inf ? 0.0 : std::exp(row[u] - m);
          for (int64_t u = 0; u < T; ++u) {
            // All keys masked: m = -inf, sum = 0; the row is defined as 0.
            probs[u] = m == minus_inf || row[u] == minus_inf ? 0.0 : std::exp(row[u] - m) / sum;
            a.saved.probs.data[pr.probs0 + t * T + u] = static_cast<float>(probs[u]);
          }
          if (p.dropout_active())
            for (int64_t u = 0; u < T; ++u) {
              const float keep = a.streams[b].uniform() >= p.dropout_p ? p.keep_scale() : 0.0f;
              a.saved.dropout_mask.data[pr.probs0 + t * T + u] = keep;
              probs[u] *= keep;
            }
          for (int64_t d = 0; d < dh; ++d) {
            double o = 0.0;
            for (int64_t u = 0; u < T; ++u) o += probs[u] * pr.v[u * ld + d];
            a.out.data[(pr.row0 + t) * D + h * dh + d] = static_cast<float>(o);
          }
        }
      }
}

// With P the saved probs, M the mask (1 without dropout), dO the head's output gradient:
//   dV = (P M)^T dO,   dP = (dO V^T) M,   dS = P (dP - rowsum(P dP)),
//   dQ = dS K / sqrt(dh),   dK = dS^T Q / sqrt(dh)   (products elementwise where not matrices).
void attention_backward(const AttentionParams& p, const AttentionBackwardArgs& a) {
  check_attention_backward(p, a);
  const int64_t T = p.T, D = p.D, dh = p.head_dim(), ld = 3 * D;
  const double scale = p.score_scale();
  std::vector<double> ds(static_cast<size_t>(T * T)), dq(static_cast<size_t>(T * dh)),
      dk(dq.size()), dv(dq.size());
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t s = 0; s < p.n; ++s)
      for (int64_t h = 0; h < p.H; ++h) {
        const Problem pr = problem(p, a.qkv.data, b, s, h);
        const float* P = a.saved.probs.data + pr.probs0;
        auto mask = [&](int64_t i) {
          return p.dropout_active() ? double(a.saved.dropout_mask.data[pr.probs0 + i]) : 1.0;
        };
        const float* dout = a.dout.data + pr.row0 * D + h * dh;
        std::fill(dv.begin(), dv.end(), 0.0);
        for (int64_t t = 0; t < T; ++t) {
          double c = 0.0;
          for (int64_t u = 0; u < T; ++u) {
            double dp = 0.0;
            for (int64_t d = 0; d < dh; ++d) dp += double(dout[t * D + d]) * pr.v[u * ld + d];
            dp *= mask(t * T + u);
            ds[t * T + u] = dp;
            c += double(P[t * T + u]) * dp;
            for (int64_t d = 0; d < dh; ++d)
              dv[u * dh + d] += double(P[t * T + u]) * mask(t * T + u) * dout[t * D + d];
          }
          for (int64_t u = 0; u < T; ++u) ds[t * T + u] = P[t * T + u] * (ds[t * T + u] - c);
        }
        for (int64_t t = 0; t < T; ++t)
          for (int64_t d = 0; d < dh; ++d) {
            double gq = 0.0, gk = 0.0;
            for (int64_t u = 0; u < T; ++u) {
              gq += ds[t * T + u] * pr.k[u * ld + d];
              gk += ds[u * T + t] * pr.q[u * ld + d];
            }
            dq[t * dh + d] = gq * scale;
            dk[t * dh + d] = gk * scale;
          }
        for (int64_t t = 0; t < T; ++t)
          for (int64_t d = 0; d < dh; ++d) {
            float* row = a.dqkv.data + (pr.row0 + t) * ld + h * dh + d;
            const double grads[3] = {dq[t * dh + d], dk[t * dh + d], dv[t * dh + d]};
            for (int part = 0; part < 3; ++part) {
              float& out = row[part * D];
              out = static_cast<float>(a.accumulate_dx ? out + grads[part] : grads[part]);
            }
          }
      }
}

}  // namespace ref
}  // namespace hfta
