// Finite-difference checks of every reference op's backward on tiny random inputs.
//
// For an op y = f(x1, x2, ...) and a fixed random cotangent r, L = sum(r * y) is accumulated in
// double; the analytic gradient is the op's backward with dout = r, the numeric one the central
// difference (L(x + h) - L(x - h)) / 2h with h = 1e-3 on each input element. The ops run in fp32,
// so the bound is relative to the largest gradient: max|analytic - numeric| <= 2e-3 * max|grad|.
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/reference/ops_activation.h"
#include "worker/reference/ops_attention.h"
#include "worker/reference/ops_embedding.h"
#include "worker/reference/ops_linear.h"
#include "worker/reference/ops_loss.h"
#include "worker/reference/ops_moe.h"
#include "worker/reference/ops_norm.h"
#include "worker/reference/ops_rope.h"

namespace mobius::reference {
namespace {

using Buffer = std::vector<float>;

Buffer Random(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  Buffer v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// forward(): the op's output from the current inputs.
// backward(dout): the op's gradients for each input, in `inputs` order.
void CheckGradients(const std::string& op, std::vector<Buffer*> inputs,
                    const std::function<Buffer()>& forward,
                    const std::function<std::vector<Buffer>(const Buffer&)>& backward) {
  const Buffer y = forward();
  const Buffer r = Random(static_cast<int64_t>(y.size()), 99);
  auto objective = [&] {
    const Buffer out = forward();
    double acc = 0.0;
    for (size_t i = 0; i < out.size(); ++i) acc += static_cast<double>(r[i]) * out[i];
    return acc;
  };
  const std::vector<Buffer> analytic = backward(r);
  ASSERT_EQ(analytic.size(), inputs.size()) << op;
  constexpr float kStep = 1e-3f;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Buffer& x = *inputs[k];
    ASSERT_EQ(analytic[k].size(), x.size()) << op << " input " << k;
    double max_grad = 0.0, max_diff = 0.0;
    size_t worst = 0;
    std::vector<double> numeric(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const float saved = x[i];
      x[i] = saved + kStep;
      const double up = objective();
      x[i] = saved - kStep;
      const double down = objective();
      x[i] = saved;
      // The perturbation actually applied, after fp32 rounding of x +- h.
      const double h2 = static_cast<double>(saved + kStep) - static_cast<double>(saved - kStep);
      numeric[i] = (up - down) / h2;
      max_grad = std::max(max_grad, std::fabs(numeric[i]));
    }
    for (size_t i = 0; i < x.size(); ++i) {
      const double diff = std::fabs(numeric[i] - analytic[k][i]);
      if (diff > max_diff) {
        max_diff = diff;
        worst = i;
      }
    }
    EXPECT_GT(max_grad, 0.0) << op << " input " << k << ": gradient identically zero";
    EXPECT_LE(max_diff, 2e-3 * max_grad + 1e-6)
        << op << " input " << k << " worst element " << worst << ": analytic " << analytic[k][worst]
        << " numeric " << numeric[worst] << " (max|grad| " << max_grad << ")";
  }
}

TEST(ReferenceOps, LinearBothLayouts) {
  const int64_t n = 3, in = 4, out = 5;
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
    Buffer x = Random(n * in, 1), w = Random(in * out, 2), b = Random(out, 3);
    CheckGradients(
        "linear", {&x, &w, &b},
        [&] {
          Buffer y(n * out);
          LinearForward(y.data(), x.data(), w.data(), b.data(), n, in, out, layout);
          return y;
        },
        [&](const Buffer& dy) {
          Buffer dx(x.size()), dw(w.size()), db(b.size());
          LinearBackward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), n, in, out,
                         layout);
          return std::vector<Buffer>{dx, dw, db};
        });
  }
}

TEST(ReferenceOps, LinearLayoutsAgree) {
  // W [in, out] and its transpose [out, in] compute the same map.
  const int64_t n = 2, in = 3, out = 4;
  Buffer x = Random(n * in, 1), w = Random(in * out, 2), wt(in * out), y1(n * out), y2(n * out);
  for (int64_t i = 0; i < in; ++i)
    for (int64_t o = 0; o < out; ++o) wt[o * in + i] = w[i * out + o];
  LinearForward(y1.data(), x.data(), w.data(), nullptr, n, in, out, WeightLayout::kInOut);
  LinearForward(y2.data(), x.data(), wt.data(), nullptr, n, in, out, WeightLayout::kOutIn);
  for (int64_t i = 0; i < n * out; ++i) EXPECT_FLOAT_EQ(y1[i], y2[i]);
}

TEST(ReferenceOps, LayerNorm) {
  const int64_t n = 3, c = 6;
  Buffer x = Random(n * c, 1), w = Random(c, 2), b = Random(c, 3);
  Buffer mean(n), rstd(n);
  CheckGradients(
      "layernorm", {&x, &w, &b},
      [&] {
        Buffer y(n * c);
        LayerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c,
                         1e-5f);
        return y;
      },
      [&](const Buffer& dy) {
        Buffer dx(x.size()), dw(w.size()), db(b.size());
        LayerNormBackward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                          mean.data(), rstd.data(), n, c);
        return std::vector<Buffer>{dx, dw, db};
      });
}

TEST(ReferenceOps, RmsNorm) {
  const int64_t n = 3, c = 6;
  Buffer x = Random(n * c, 1), w = Random(c, 2), rstd(n);
  CheckGradients(
      "rmsnorm", {&x, &w},
      [&] {
        Buffer y(n * c);
        RmsNormForward(y.data(), rstd.data(), x.data(), w.data(), n, c, 1e-6f);
        return y;
      },
      [&](const Buffer& dy) {
        Buffer dx(x.size()), dw(w.size());
        RmsNormBackward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), n, c);
        return std::vector<Buffer>{dx, dw};
      });
}

TEST(ReferenceOps, RmsNormValue) {
  // y = w * x / sqrt(mean(x^2) + eps): x = (3, 4), mean(x^2) = 12.5.
  Buffer x{3.0f, 4.0f}, w{1.0f, 2.0f}, y(2), rstd(1);
  RmsNormForward(y.data(), rstd.data(), x.data(), w.data(), 1, 2, 0.0f);
  EXPECT_FLOAT_EQ(y[0], 3.0f / std::sqrt(12.5f));
  EXPECT_FLOAT_EQ(y[1], 8.0f / std::sqrt(12.5f));
}

TEST(ReferenceOps, Gelu) {
  Buffer x = Random(20, 1, 2.0f);
  CheckGradients(
      "gelu", {&x},
      [&] {
        Buffer y(x.size());
        GeluForward(y.data(), x.data(), static_cast<int64_t>(x.size()));
        return y;
      },
      [&](const Buffer& dy) {
        Buffer dx(x.size());
        GeluBackward(dx.data(), dy.data(), x.data(), static_cast<int64_t>(x.size()));
        return std::vector<Buffer>{dx};
      });
  // gelu_new(1) = 0.5 * (1 + tanh(sqrt(2/pi) * 1.044715))
  Buffer one{1.0f}, y(1);
  GeluForward(y.data(), one.data(), 1);
  EXPECT_NEAR(y[0], 0.8411920071, 1e-7);
}

TEST(ReferenceOps, SwiGlu) {
  Buffer gate = Random(20, 1, 2.0f), up = Random(20, 2);
  const int64_t n = 20;
  CheckGradients(
      "swiglu", {&gate, &up},
      [&] {
        Buffer y(n);
        SwiGluForward(y.data(), gate.data(), up.data(), n);
        return y;
      },
      [&](const Buffer& dy) {
        Buffer dg(n), du(n);
        SwiGluBackward(dg.data(), du.data(), dy.data(), gate.data(), up.data(), n);
        return std::vector<Buffer>{dg, du};
      });
}

// Top-k routing: the route weights' gradient through the top-k (renormalised or not) and the
// softmax, by finite differences (seeded logits whose top-k margins exceed the step).
void CheckRoute(bool renormalize) {
  const int64_t n = 5, e = 6, k = 3;
  Buffer logits = Random(n * e, 7, 2.0f);
  Buffer probs(n * e), weights(n * k);
  std::vector<int32_t> ids(n * k);
  CheckGradients(
      renormalize ? "route_renormalized" : "route", {&logits},
      [&] {
        RouteForward(probs.data(), ids.data(), weights.data(), logits.data(), n, e, k,
                     renormalize);
        return weights;
      },
      [&](const Buffer& dw) {
        RouteForward(probs.data(), ids.data(), weights.data(), logits.data(), n, e, k,
                     renormalize);
        Buffer dlogits(n * e, 0.0f);
        RouteBackward(dlogits.data(), dw.data(), nullptr, probs.data(), ids.data(),
                      weights.data(), n, e, k, renormalize);
        return std::vector<Buffer>{dlogits};
      });
}

TEST(ReferenceOps, RouteTopK) { CheckRoute(false); }
TEST(ReferenceOps, RouteTopKRenormalized) { CheckRoute(true); }

TEST(ReferenceOps, RouteOrderAndTies) {
  // Descending probability; equal logits keep the lower expert first.
  const Buffer logits = {0.5f, 2.0f, 0.5f, -1.0f};
  Buffer probs(4), weights(2);
  std::vector<int32_t> ids(2);
  RouteForward(probs.data(), ids.data(), weights.data(), logits.data(), 1, 4, 2, false);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 0}));
  EXPECT_FLOAT_EQ(weights[0], probs[1]);
  RouteForward(probs.data(), ids.data(), weights.data(), logits.data(), 1, 4, 2, true);
  EXPECT_NEAR(weights[0] + weights[1], 1.0f, 1e-6f);
}

TEST(ReferenceOps, LoadBalancingLossAndGradient) {
  // aux = E sum_e f_e P_e; d aux / d logits through the softmax with f held (RouteBackward's
  // aux_grad), against finite differences of aux computed with the routing of the unperturbed
  // logits (f is piecewise constant).
  const int64_t n = 4, e = 5, k = 2;
  Buffer logits = Random(n * e, 3, 1.5f), probs(n * e), weights(n * k);
  std::vector<int32_t> ids(n * k);
  RouteForward(probs.data(), ids.data(), weights.data(), logits.data(), n, e, k, false);
  std::vector<double> counts(e, 0.0), sums(e, 0.0);
  AccumulateRouting(counts, sums, probs.data(), ids.data(), n, e, k);
  double total = 0.0;
  for (double c : counts) total += c;
  EXPECT_EQ(total, n * k);
  const std::vector<float> g = LoadBalancingGrad(counts, n, 1.0);
  Buffer dlogits(n * e, 0.0f), zero(n * k, 0.0f);
  RouteBackward(dlogits.data(), zero.data(), g.data(), probs.data(), ids.data(), weights.data(), n,
                e, k, false);
  auto aux = [&](const Buffer& l) {
    Buffer p(n * e), w(n * k);
    std::vector<int32_t> unused(n * k);
    RouteForward(p.data(), unused.data(), w.data(), l.data(), n, e, k, false);
    std::vector<double> s(e, 0.0), c(e, 0.0);
    AccumulateRouting(c, s, p.data(), ids.data(), n, e, k);  // the unperturbed routing's counts
    return LoadBalancingLoss(counts, s, n);
  };
  for (int64_t i = 0; i < n * e; ++i) {
    Buffer up = logits, down = logits;
    up[i] += 1e-3f;
    down[i] -= 1e-3f;
    const double numeric = (aux(up) - aux(down)) / (static_cast<double>(up[i]) - down[i]);
    EXPECT_NEAR(dlogits[i], numeric, 2e-3 * std::fabs(numeric) + 1e-5) << "logit " << i;
  }
  // Perfect balance with uniform probabilities gives aux = k (its minimum).
  std::vector<double> even(e, 2.0 * k), uniform(e, 2.0);
  EXPECT_NEAR(LoadBalancingLoss(even, uniform, 2 * e), static_cast<double>(k), 1e-12);
}

TEST(ReferenceOps, Rope) {
  const int64_t b = 2, t = 5, nh = 3, hd = 8;
  Buffer x = Random(b * t * nh * hd, 1);
  model::RopeScaling scaling;
  Buffer cos, sin;
  RopeTables(&cos, &sin, RopeInverseFrequencies(hd, 100.0, scaling), t);
  CheckGradients(
      "rope", {&x},
      [&] {
        Buffer y(x.size());
        RopeForward(y.data(), x.data(), cos.data(), sin.data(), b, t, nh, hd);
        return y;
      },
      [&](const Buffer& dy) {
        Buffer dx(x.size());
        RopeBackward(dx.data(), dy.data(), cos.data(), sin.data(), b, t, nh, hd);
        return std::vector<Buffer>{dx};
      });
}

TEST(ReferenceOps, RopePairsAndPositionZero) {
  // HF rotate_half pairs i with i + hd/2; position 0 is the identity.
  const int64_t hd = 4;
  Buffer x{1, 2, 3, 4, 1, 2, 3, 4}, y(8), cos, sin;
  const Buffer inv_freq = RopeInverseFrequencies(hd, 10000.0, {});
  ASSERT_EQ(inv_freq.size(), 2u);
  EXPECT_FLOAT_EQ(inv_freq[0], 1.0f);
  EXPECT_FLOAT_EQ(inv_freq[1], 0.01f);
  RopeTables(&cos, &sin, inv_freq, 2);
  RopeForward(y.data(), x.data(), cos.data(), sin.data(), 1, 2, 1, hd);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(y[i], x[i]);
  EXPECT_NEAR(y[4], 1 * std::cos(1.0) - 3 * std::sin(1.0), 1e-6);
  EXPECT_NEAR(y[6], 3 * std::cos(1.0) + 1 * std::sin(1.0), 1e-6);
  EXPECT_NEAR(y[5], 2 * std::cos(0.01) - 4 * std::sin(0.01), 1e-6);
}

TEST(ReferenceOps, RopeScaling) {
  model::RopeScaling linear{.type = model::RopeScaling::Type::kLinear, .factor = 4.0};
  const Buffer base = RopeInverseFrequencies(8, 10000.0, {});
  const Buffer lin = RopeInverseFrequencies(8, 10000.0, linear);
  for (size_t i = 0; i < base.size(); ++i) EXPECT_FLOAT_EQ(lin[i], base[i] / 4.0f);
  // llama3, wavelengths 6.3, 63, 628, 6283 against low/high wavelength 64/16: the first stays,
  // the last two are divided by the factor, the second is interpolated.
  model::RopeScaling llama3{.type = model::RopeScaling::Type::kLlama3,
                            .factor = 8.0,
                            .low_freq_factor = 1.0,
                            .high_freq_factor = 4.0,
                            .original_max_position_embeddings = 64};
  const Buffer l3 = RopeInverseFrequencies(8, 10000.0, llama3);
  EXPECT_FLOAT_EQ(l3[0], base[0]);
  EXPECT_FLOAT_EQ(l3[2], base[2] / 8.0f);
  EXPECT_FLOAT_EQ(l3[3], base[3] / 8.0f);
  const double smooth = (64.0 / (2 * M_PI / base[1]) - 1.0) / 3.0;
  EXPECT_NEAR(l3[1], (1 - smooth) * base[1] / 8.0 + smooth * base[1], 1e-8);
}

void CheckAttention(const AttentionShape& s) {
  Buffer q = Random(s.b * s.t * s.heads * s.head_dim, 1);
  Buffer k = Random(s.b * s.t * s.kv_heads * s.head_dim, 2);
  Buffer v = Random(s.b * s.t * s.kv_heads * s.head_dim, 3);
  Buffer att(s.b * s.heads * s.t * s.t);
  CheckGradients(
      "attention", {&q, &k, &v},
      [&] {
        Buffer y(q.size());
        AttentionForward(y.data(), att.data(), q.data(), k.data(), v.data(), s);
        return y;
      },
      [&](const Buffer& dy) {
        Buffer dq(q.size()), dk(k.size()), dv(v.size());
        AttentionBackward(dq.data(), dk.data(), dv.data(), dy.data(), q.data(), k.data(), v.data(),
                          att.data(), s);
        return std::vector<Buffer>{dq, dk, dv};
      });
}

TEST(ReferenceOps, AttentionMultiHead) {
  CheckAttention({.b = 2, .t = 4, .heads = 2, .kv_heads = 2, .head_dim = 3});
}
TEST(ReferenceOps, AttentionGroupedQuery) {
  CheckAttention({.b = 1, .t = 5, .heads = 4, .kv_heads = 2, .head_dim = 4});
}
TEST(ReferenceOps, AttentionSlidingWindow) {
  CheckAttention({.b = 1, .t = 6, .heads = 2, .kv_heads = 1, .head_dim = 4, .window = 3});
}

TEST(ReferenceOps, AttentionIsCausal) {
  // The first position sees only itself: out[0] = v[0]; probabilities above the diagonal are 0.
  const AttentionShape s{.b = 1, .t = 3, .heads = 1, .kv_heads = 1, .head_dim = 2};
  Buffer q = Random(6, 1), k = Random(6, 2), v = Random(6, 3), y(6), att(9);
  AttentionForward(y.data(), att.data(), q.data(), k.data(), v.data(), s);
  EXPECT_FLOAT_EQ(y[0], v[0]);
  EXPECT_FLOAT_EQ(y[1], v[1]);
  EXPECT_EQ(att[1], 0.0f);
  EXPECT_EQ(att[2], 0.0f);
  EXPECT_EQ(att[5], 0.0f);
  EXPECT_NEAR(att[3] + att[4], 1.0f, 1e-6);
}

TEST(ReferenceOps, CrossEntropyWithIgnoreIndex) {
  const int64_t n = 4, v = 5;
  Buffer logits = Random(n * v, 1, 2.0f), probs(n * v), losses(n);
  const std::vector<int32_t> targets{3, kIgnoreIndex, 0, 4};
  CheckGradients(
      "cross_entropy", {&logits},
      [&] {
        return Buffer{
            CrossEntropyForward(probs.data(), losses.data(), logits.data(), targets.data(), n, v)};
      },
      [&](const Buffer& dloss) {
        Buffer dlogits(logits.size());
        CrossEntropyBackward(dlogits.data(), probs.data(), targets.data(), n, v, dloss[0]);
        return std::vector<Buffer>{dlogits};
      });
  // The ignored row gets no gradient and no loss; the mean is over the 3 counted rows.
  const float loss =
      CrossEntropyForward(probs.data(), losses.data(), logits.data(), targets.data(), n, v);
  EXPECT_EQ(losses[1], 0.0f);
  EXPECT_NEAR(loss, (losses[0] + losses[2] + losses[3]) / 3.0f, 1e-6);
  Buffer dlogits(n * v);
  CrossEntropyBackward(dlogits.data(), probs.data(), targets.data(), n, v, 1.0f);
  for (int64_t i = 0; i < v; ++i) EXPECT_EQ(dlogits[v + i], 0.0f);
  // log-sum-exp of uniform logits: loss = ln(V).
  Buffer zeros(v, 0.0f), p(v), l(1);
  const int32_t target = 2;
  EXPECT_NEAR(CrossEntropyForward(p.data(), l.data(), zeros.data(), &target, 1, v), std::log(5.0),
              1e-6);
}

TEST(ReferenceOps, Embedding) {
  const int64_t b = 2, t = 3, c = 4, vocab = 5;
  Buffer wte = Random(vocab * c, 1), wpe = Random(t * c, 2);
  const std::vector<int32_t> tokens{1, 4, 1, 0, 2, 4};
  CheckGradients(
      "embedding", {&wte, &wpe},
      [&] {
        Buffer y(b * t * c);
        EmbeddingForward(y.data(), tokens.data(), wte.data(), wpe.data(), b, t, c);
        return y;
      },
      [&](const Buffer& dy) {
        Buffer dwte(wte.size()), dwpe(wpe.size());
        EmbeddingBackward(dwte.data(), dwpe.data(), dy.data(), tokens.data(), b, t, c);
        return std::vector<Buffer>{dwte, dwpe};
      });
}

}  // namespace
}  // namespace mobius::reference
