// Internal to common/jobspec: the one list of JobSpec fields, their keys and their kinds.
//
// The YAML reader, the JSON reader and the JSON writer all walk a JobSpec through VisitJobSpec, so
// the keys of the three formats (and the field paths in their errors) cannot drift apart. A visitor
// provides, for a key and a member:
//   Int(key, int& | int64_t&)  UInt(key, uint64_t&)  Double(key, double&)  String(key, string&)
//   Bool(key, bool&)
//   Path(key, string&)         a file or directory (the YAML reader resolves it against a base)
//   PathList(key, vector<string>&)  a list of paths (resolved like Path)
//   StringList(key, vector<string>&)  a list of strings
//   Gpus(key, int&)            a count, or "all" (= 0) in YAML
//   Bytes(key, int64_t&)       a byte count, or a size such as "20GiB" in YAML
//   Labels(key, map&)          a mapping of strings to strings
//   Section(key, fn)           a nested mapping whose fields fn() visits
//   OptionalSection(key, optional<T>&, fn)
//                              a nested mapping that may be absent (nullopt; the writers leave it
//                              out); fn(T&) visits the fields of the value (readers emplace it
//                              when the key is there)
// `Spec` is JobSpec (readers) or const JobSpec (writers); members are passed as references to it.
//
// Not a public header: include yaml.h / json.h instead.
#ifndef MOBIUS_COMMON_JOBSPEC_FIELDS_H_
#define MOBIUS_COMMON_JOBSPEC_FIELDS_H_

#include <type_traits>

#include "common/jobspec/spec.h"

namespace mobius::jobspec::internal {

template <typename Spec, typename Visitor>
void VisitJobSpec(Spec& s, Visitor& v) {
  static_assert(std::is_same_v<std::remove_const_t<Spec>, JobSpec>);
  v.String("name", s.name);
  v.Labels("labels", s.labels);
  v.Int("priority", s.priority);
  v.Path("model_dir", s.model_dir);
  v.Section("dataset", [&] {
    v.Path("path", s.dataset.path);
    v.PathList("paths", s.dataset.paths);
    v.String("format", s.dataset.format);
    v.Path("tokenizer", s.dataset.tokenizer);
    v.String("text_field", s.dataset.text_field);
    v.String("prompt_field", s.dataset.prompt_field);
    v.String("completion_field", s.dataset.completion_field);
    v.String("messages_field", s.dataset.messages_field);
    v.String("chat_template", s.dataset.chat_template);
    v.Labels("chat_template_kwargs", s.dataset.chat_template_kwargs);
    v.Bool("skip_bad_lines", s.dataset.skip_bad_lines);
    v.Double("eval_fraction", s.dataset.eval_fraction);
  });
  v.Section("training", [&] {
    auto& t = s.training;
    v.Int("steps", t.steps);
    v.Int("epochs", t.epochs);
    v.Int("global_batch", t.global_batch);
    v.Int("microbatch", t.microbatch);
    v.Int("seq_len", t.seq_len);
    v.Double("lr", t.lr);
    v.Double("min_lr", t.min_lr);
    v.Int("warmup_steps", t.warmup_steps);
    v.String("lr_schedule", t.lr_schedule);
    v.Double("weight_decay", t.weight_decay);
    v.Double("grad_clip", t.grad_clip);
    v.Double("beta1", t.beta1);
    v.Double("beta2", t.beta2);
    v.Double("eps", t.eps);
    v.UInt("seed", t.seed);
    v.Int("eval_every", t.eval_every);
    v.Int("optimizer_staleness", t.optimizer_staleness);
    v.String("precision", t.precision);
  });
  v.Section("resources", [&] {
    v.Gpus("gpus", s.resources.gpus);
    v.Bytes("device_memory_bytes", s.resources.device_memory_bytes);
  });
  v.Section("plan", [&] {
    v.String("schedule", s.plan.schedule);
    v.String("partitioner", s.plan.partitioner);
    v.String("mapper", s.plan.mapper);
    v.Int("stages", s.plan.stages);
    v.String("dispatch", s.plan.dispatch);
  });
  v.Section("checkpoint", [&] {
    v.Path("dir", s.checkpoint.dir);
    v.Int("every_steps", s.checkpoint.every_steps);
    v.Int("keep_last", s.checkpoint.keep_last);
    v.String("group", s.checkpoint.group);
  });
  v.Int("max_restarts", s.max_restarts);
  v.OptionalSection("adapter", s.adapter, [&](auto& a) {
    v.String("type", a.type);
    v.Int("rank", a.rank);
    v.Double("alpha", a.alpha);
    v.Double("dropout", a.dropout);
    v.StringList("target_modules", a.target_modules);
    v.Path("init_from", a.init_from);
    v.String("base_quantization", a.base_quantization);
  });
}

}  // namespace mobius::jobspec::internal

#endif  // MOBIUS_COMMON_JOBSPEC_FIELDS_H_
