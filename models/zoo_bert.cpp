// HFTA's examples/bert BERT (model/bert.py, embedding.py, transformer.py, utils.py), written as
// functions over the net with the state_dict names its modules give unfused (B = 0):
//
//   embedding.{token,position,segment}.weight            BERTEmbedding: token + position + segment
//   transformer_blocks.<l>.attention.{in_proj_weight,in_proj_bias,out_proj.weight,out_proj.bias}
//   transformer_blocks.<l>.input_sublayer.norm.{weight,bias}    pre-norm residual around attention
//   transformer_blocks.<l>.feed_forward.w_{1,2}.{weight,bias}   Linear, GELU, dropout, Linear
//   transformer_blocks.<l>.output_sublayer.norm.{weight,bias}   pre-norm residual around it
//   output.{weight,bias}                                        Linear(hidden, vocab)
//
// Sizes: hidden = --emsize, feed-forward = --nhid (the example's 4 * hidden), --nlayers, --nhead.
// Dropout: after the embedding sum, after each sublayer, inside the feed-forward and after each
// block, as the example; its MultiheadAttention has no attention dropout. The attention is
// bidirectional (BERT); the example's key mask on ids <= 0 is left out: our windows have no
// padding, and id 0 is an ordinary word here. The example ends in log_softmax + nll_loss, which
// is the cross-entropy on these logits.
#include <string>

#include "models/masked_lm.h"

namespace hfta {

namespace {

// SublayerConnection: x + dropout(sublayer(norm(x))).
template <typename Sublayer>
Value sublayer_connection(Net& n, Value x, const std::string& name, float dropout, Sublayer f) {
  Value h;
  {
    Net::Scope s = n.scope(name);
    h = n.layernorm(x, "norm");
  }
  return n.add(x, n.dropout(f(h), dropout));
}

// TransformerBlock(hidden, heads, 4 * hidden, dropout).
Value transformer_block(Net& n, Value x, const LmConfig& c) {
  x = sublayer_connection(n, x, "input_sublayer", c.dropout, [&](Value h) {
    return n.self_attention(h, "attention", {.heads = c.nhead, .causal = false, .dropout = 0.0f});
  });
  x = sublayer_connection(n, x, "output_sublayer", c.dropout, [&](Value h) {
    Net::Scope ff = n.scope("feed_forward");
    Value f = n.gelu(n.token_linear(h, "w_1", {.out_features = c.nhid}));
    return n.token_linear(n.dropout(f, c.dropout), "w_2", {.out_features = c.emsize});
  });
  return n.dropout(x, c.dropout);
}

}  // namespace

Value define_bert(Net& n, const MlmInputs& in, const LmConfig& c) {
  Value x;
  {
    // BERTEmbedding: nn.Embedding's N(0, 1) for all three tables; its dropout is the example's
    // default 0.1 (BERT passes none), which --dropout replaces here like every other.
    Net::Scope embedding = n.scope("embedding");
    Value token = n.embedding(in.tokens, "token", {.vocab = c.vocab, .dim = c.emsize});
    Value position =
        n.embedding(in.positions, "position", {.vocab = kBertMaxPositions, .dim = c.emsize});
    Value segment = n.embedding(in.segments, "segment", {.vocab = kBertSegments, .dim = c.emsize});
    x = n.dropout(n.add(token, n.add(position, segment)), c.dropout);
  }
  {
    Net::Scope blocks = n.scope("transformer_blocks");
    for (int64_t l = 0; l < c.nlayers; ++l) {
      Net::Scope block = n.scope(std::to_string(l));
      x = transformer_block(n, x, c);
    }
  }
  // Masked-only output: the output layer sees the predicted rows alone (models/masked_lm.h).
  if (in.predicted.valid()) x = n.gather_tokens(x, in.predicted);
  return n.token_linear(x, "output", {.out_features = c.vocab});
}

}  // namespace hfta
