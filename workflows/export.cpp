#include "workflows/export.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>

#include "core/error.h"
#include "datasets/text_corpus.h"
#include "fused_ops/positions.h"
#include "models/gan.h"
#include "models/language_model.h"
#include "models/masked_lm.h"
#include "models/model.h"
#include "workflows/checkpoint.h"
#include "workflows/cli.h"
#include "workflows/export_bert.h"
#include "workflows/gan_checkpoint.h"
#include "workflows/resume.h"

namespace hfta {

std::vector<SafeTensor> state_dict(const Model& model, int64_t b) {
  HFTA_CHECK(b >= 0 && b < model.B(), "{}: no model {} in an array of {}", model.name(), b,
             model.B());
  return state_dict(model.net(), b);
}

std::vector<SafeTensor> state_dict(const Net& net, int64_t b) {
  HFTA_CHECK(b >= 0 && b < net.B(), "no model {} in an array of {}", b, net.B());
  std::vector<SafeTensor> out;
  for (const Param& p : net.params()) {
    const TensorView v = p.value.replica(b);
    SafeTensor t{.name = p.name};
    if (p.torch_transposed) {  // [in, out] here, [out, in] in PyTorch
      const int64_t in = v.shape[0], outs = v.shape[1];
      t.shape = {outs, in};
      t.floats.resize(static_cast<size_t>(v.numel()));
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < outs; ++o)
          t.floats[static_cast<size_t>(o * in + i)] = v[i * outs + o];
      if (p.torch_kernel1) t.shape.push_back(1);  // Conv1d(kernel 1): [out, in, 1]
    } else {
      t.shape.assign(v.shape.begin(), v.shape.end());
      t.floats.assign(v.data, v.data + v.numel());
    }
    out.push_back(std::move(t));
  }
  for (const ModelBuffer& buf : net.buffers()) {
    const TensorView v = buf.value.replica(b);
    SafeTensor t{.name = buf.name, .shape = std::vector<int64_t>(v.shape.begin(), v.shape.end())};
    if (buf.integer) {
      t.dtype = "I64";
      for (int64_t i = 0; i < v.numel(); ++i) t.integers.push_back(std::llround(v[i]));
    } else {
      t.floats.assign(v.data, v.data + v.numel());
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace hfta

namespace hfta {

namespace {

std::map<std::string, std::string> export_metadata(const Model& model, const std::string& source) {
  return {{"format", "pt"},
          {"hfta_model", model.name()},
          {"sample_shape", model.sample_shape().str()},
          {"num_classes", std::to_string(model.num_classes())},
          {"source", source}};
}

// A language model's initial weights (--init --arch transformer), with its PositionalEncoding's
// `pos_encoder.pe` buffer [5000, 1, D] (word_language_model's max_len), so PyTorch's
// TransformerModel loads the file strictly, and its vocabulary beside it (<out>.vocab.txt, one
// word per line in id order; "<w17>" placeholders without --text-files).
void export_language_model(const std::string& arch, const std::string& out, uint64_t seed,
                           const LmConfig& sizes, const std::string& text_files) {
  LmConfig config = sizes;
  std::vector<std::string> words;
  if (!text_files.empty()) {
    TextCorpus corpus = load_text_files(split_paths(text_files), {.seed = seed});
    words = corpus.dictionary.words();
    config.vocab = corpus.vocab_size();
  } else {
    for (int64_t i = 0; i < config.vocab; ++i) words.push_back(fmt::format("<w{}>", i));
  }
  auto model = make_language_model(arch, {.B = 1, .streams = 1, .seed = seed, .config = config});
  std::vector<SafeTensor> tensors = state_dict(model->net(), 0);
  constexpr int64_t kMaxLen = 5000;
  tensors.push_back({.name = "pos_encoder.pe",
                     .shape = {kMaxLen, 1, config.emsize},
                     .floats = sinusoidal_table(kMaxLen, config.emsize)});
  const std::string source = fmt::format("initial weights, seed {}", seed);
  write_safetensors(out, tensors,
                    {{"format", "pt"},
                     {"hfta_model", arch},
                     {"vocab", std::to_string(config.vocab)},
                     {"emsize", std::to_string(config.emsize)},
                     {"nhid", std::to_string(config.nhid)},
                     {"nlayers", std::to_string(config.nlayers)},
                     {"nhead", std::to_string(config.nhead)},
                     {"source", source}});
  const std::string vocab_path = out + ".vocab.txt";
  std::ofstream vocab(vocab_path);
  for (const std::string& w : words) vocab << w << "\n";
  HFTA_CHECK(vocab.good(), "cannot write the vocabulary to {}", vocab_path);
  fmt::print("{} ({}; vocabulary {} in {}) written to {}: {} parameter values\n", arch, source,
             config.vocab, vocab_path, out, model->params_per_model());
}

}  // namespace

// The initial weights of one network of a DCGAN (model 0 of an array seeded with `seed`).
template <typename Args>
void export_dcgan_init(const Args& args) {
  DcganArch arch;
  if (!args.sample_shape.empty()) {
    HFTA_CHECK(args.sample_shape.size() == 3 && args.sample_shape[1] == args.sample_shape[2],
               "--sample-shape for dcgan is C,S,S (square images), got {}",
               fmt::join(args.sample_shape, ","));
    arch.nc = args.sample_shape[0];
    arch.image = args.sample_shape[1];
  }
  const DcganNet which = args.net == "d" ? DcganNet::kDiscriminator : DcganNet::kGenerator;
  Net net(NetSpec{.B = 1, .capacity = 2, .seed = dcgan_seed(args.seed, which)});
  if (which == DcganNet::kGenerator) {
    net.add_output_grad(dcgan_generator(net, net.model_input({arch.nz, 1, 1}), arch));
  } else {
    net.bce_with_logits(
        dcgan_discriminator(net, net.input({arch.nc, arch.image, arch.image}), arch), 1.0f);
  }
  net.finalize();
  const std::string source = fmt::format("initial weights, seed {}", args.seed);
  write_safetensors(args.out, state_dict(net, 0),
                    {{"format", "pt"},
                     {"hfta_model", std::string("dcgan_") + args.net},
                     {"sample_shape", fmt::format("[{}, {}, {}]", arch.nc, arch.image, arch.image)},
                     {"source", source}});
  fmt::print("dcgan {} ({}) written to {}: {} parameter and {} buffer values\n", args.net, source,
             args.out, net.params_per_model(), net.buffers_per_model());
}

// One network (--net g|d) of a trained DCGAN (a B = 1 checkpoint of `hfta train --model dcgan`).
void export_dcgan_trained(const Checkpoint& c, const std::string& which, const std::string& out,
                          const std::string& source) {
  auto net =
      dcgan_net_from_checkpoint(c, which == "d" ? DcganNet::kDiscriminator : DcganNet::kGenerator);
  write_safetensors(out, state_dict(*net, 0),
                    {{"format", "pt"},
                     {"hfta_model", "dcgan_" + which},
                     {"sample_shape", fmt::format("[{}]", fmt::join(c.sample_shape, ", "))},
                     {"source", source}});
  fmt::print("dcgan {} ({}) written to {}: {} parameter and {} buffer values\n", which, source, out,
             net->params_per_model(), net->buffers_per_model());
}

void add_export_command(CLI::App& app) {
  struct Args {
    std::string run, checkpoint, out, arch, net = "g";
    std::vector<int64_t> sample_shape;
    int64_t model = -1, classes = 10;
    uint64_t seed = 1;
    bool init = false;
    LmConfig lm;  // language models' sizes (--vocab --emsize --nhid --nlayers --nhead)
    std::string text_files;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Write one model as safetensors with PyTorch's state_dict names and layouts (for "
      "torchvision's resnet18 / mobilenet_v2 or benchmarks/torch_models.py)");
  auto* run = cmd->add_option("--run", args->run, "The --out directory of `hfta train`");
  auto* checkpoint =
      cmd->add_option("--checkpoint", args->checkpoint, "A checkpoint file (e.g. from extract)");
  cmd->add_option("--model", args->model,
                  "Model index: its number in the run (--run), or its index in the checkpoint "
                  "(default 0)")
      ->check(integer_at_least(0));
  auto* init = cmd->add_flag("--init", args->init,
                             "Export freshly initialized weights (--arch, --seed, --sample-shape, "
                             "--classes): the starting point of benchmarks/torch_golden.py");
  std::vector<std::string> architectures = model_names();
  architectures.push_back("dcgan");
  for (const std::string& lm : language_model_names()) architectures.push_back(lm);
  for (const std::string& m : masked_lm_names()) architectures.push_back(m);
  cmd->add_option("--arch", args->arch, "With --init: the architecture")
      ->check(CLI::IsMember(architectures));
  cmd->add_option("--vocab", args->lm.vocab, "With --init, language models: vocabulary size")
      ->check(integer_at_least(2));
  cmd->add_option("--emsize", args->lm.emsize, "With --init, language models: embedding width");
  cmd->add_option("--nhid", args->lm.nhid, "With --init, language models: feed-forward width");
  cmd->add_option("--nlayers", args->lm.nlayers, "With --init, language models: layers");
  cmd->add_option("--nhead", args->lm.nhead, "With --init, language models: heads");
  cmd->add_option("--text-files", args->text_files,
                  "With --init, language models: the corpus whose vocabulary the model gets");
  cmd->add_option("--net", args->net,
                  "DCGAN (--init --arch dcgan, or a dcgan run): the generator (g) or the "
                  "discriminator (d); "
                  "--sample-shape gives the images (C,S,S with S 8, 16, 32 or 64)")
      ->check(CLI::IsMember({"g", "d"}));
  cmd->add_option("--seed", args->seed, "With --init: the seed (model 0's weights)");
  cmd->add_option("--sample-shape", args->sample_shape,
                  "With --init: one sample's shape, e.g. 3,32,32 (default: the architecture's)")
      ->delimiter(',')
      ->check(integer_at_least(1));
  cmd->add_option("--classes", args->classes, "With --init: classes")->check(integer_at_least(2));
  cmd->add_option("--out", args->out, "The .safetensors file to write")->required();
  run->excludes(checkpoint)->excludes(init);
  checkpoint->excludes(init);
  cmd->callback([args] {
    if (args->init && is_language_model(args->arch))
      return export_language_model(args->arch, args->out, args->seed, args->lm, args->text_files);
    if (args->init && is_masked_lm(args->arch))
      return export_masked_lm(args->arch, args->out, args->seed, args->lm, args->text_files);
    std::unique_ptr<Model> model;
    std::string source;
    if (args->init && args->arch == "dcgan") return export_dcgan_init(*args);
    if (args->init) {
      HFTA_CHECK(!args->arch.empty(), "--init needs --arch (one of {})",
                 fmt::join(model_names(), ", "));
      Shape sample;
      for (int64_t d : args->sample_shape) sample.push_back(d);
      model = make_model(args->arch, {.B = 1,
                                      .batch_size = 1,
                                      .seed = args->seed,
                                      .sample_shape = sample,
                                      .num_classes = args->classes});
      source = fmt::format("initial weights, seed {}", args->seed);
    } else {
      HFTA_CHECK(!args->run.empty() || !args->checkpoint.empty(),
                 "give --run DIR --model N, --checkpoint FILE, or --init");
      Checkpoint c;
      if (!args->run.empty()) {
        HFTA_CHECK(args->model >= 0, "--run needs --model N: the model's index in the run");
        c = model_from_run(args->run, args->model);
        source = fmt::format("model {} of {}, step {}", args->model, args->run, c.step);
      } else {
        c = load_checkpoint(args->checkpoint);
        const int64_t index = std::max<int64_t>(args->model, 0);
        c = extract_model(c, index);
        source = fmt::format("model {} of {}, step {}", index, args->checkpoint, c.step);
      }
      if (c.model == "dcgan") return export_dcgan_trained(c, args->net, args->out, source);
      model = make_model(c.model, model_spec(c, 1));
      restore_tensors(c, *model, nullptr);
    }
    write_safetensors(args->out, state_dict(*model, 0), export_metadata(*model, source));
    fmt::print("{} ({}; samples {}, {} classes) written to {}: {} parameter and {} buffer values\n",
               model->name(), source, model->sample_shape().str(), model->num_classes(), args->out,
               model->params_per_model(), model->net().buffers_per_model());
  });
}

}  // namespace hfta
