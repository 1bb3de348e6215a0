// PyTorch's examples/word_language_model TransformerModel (HFTA's examples/transformer), written
// as functions over the net: state_dict names as PyTorch's modules give them.
#include <cmath>
#include <string>

#include "models/language_model.h"

namespace hfta {

namespace {

// nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout), post-norm, ReLU.
Value encoder_layer(Net& n, Value x, const LmConfig& c) {
  Value a =
      n.self_attention(x, "self_attn", {.heads = c.nhead, .causal = true, .dropout = c.dropout});
  x = n.layernorm(n.add(x, n.dropout(a, c.dropout)), "norm1");
  Value h = n.dropout(n.relu(n.token_linear(x, "linear1", {.out_features = c.nhid})), c.dropout);
  h = n.token_linear(h, "linear2", {.out_features = c.emsize});
  return n.layernorm(n.add(x, n.dropout(h, c.dropout)), "norm2");
}

}  // namespace

Value define_transformer(Net& n, Value tokens, const LmConfig& c) {
  // encoder(src) * sqrt(ninp), then PositionalEncoding: + sinusoids, dropout.
  Value x = n.embedding(tokens, "encoder",
                        {.vocab = c.vocab, .dim = c.emsize, .weight_init = Init::uniform(0.1f)});
  x = n.dropout(n.sinusoidal_positions(x, std::sqrt(static_cast<float>(c.emsize))), c.dropout);
  {
    Net::Scope encoder = n.scope("transformer_encoder");
    Net::Scope layers = n.scope("layers");
    for (int64_t l = 0; l < c.nlayers; ++l) {
      Net::Scope layer = n.scope(std::to_string(l));
      x = encoder_layer(n, x, c);
    }
  }
  return n.token_linear(x, "decoder",
                        {.out_features = c.vocab,
                         .weight_init = Init::uniform(0.1f),
                         .bias_init = Init::constant(0.0f)});
}

}  // namespace hfta
