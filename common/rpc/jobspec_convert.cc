#include "common/rpc/jobspec_convert.h"

#include <string>

namespace mobius {
namespace {

// An empty enumerated string on the wire means "the default" (proto3 cannot tell unset from "").
std::string OrDefault(const std::string& value, const std::string& fallback) {
  return value.empty() ? fallback : value;
}

}  // namespace

v1::JobSpec JobSpecToProto(const jobspec::JobSpec& s) {
  v1::JobSpec p;
  p.set_name(s.name);
  p.mutable_labels()->insert(s.labels.begin(), s.labels.end());
  p.set_priority(s.priority);
  p.set_model_dir(s.model_dir);

  v1::DatasetSpec* d = p.mutable_dataset();
  d->set_path(s.dataset.path);
  d->set_format(s.dataset.format);
  d->set_tokenizer(s.dataset.tokenizer);
  d->set_eval_fraction(s.dataset.eval_fraction);
  for (const std::string& path : s.dataset.paths) d->add_paths(path);
  d->set_text_field(s.dataset.text_field);
  d->set_prompt_field(s.dataset.prompt_field);
  d->set_completion_field(s.dataset.completion_field);
  d->set_messages_field(s.dataset.messages_field);
  d->set_chat_template(s.dataset.chat_template);
  d->mutable_chat_template_kwargs()->insert(s.dataset.chat_template_kwargs.begin(),
                                            s.dataset.chat_template_kwargs.end());
  d->set_skip_bad_lines(s.dataset.skip_bad_lines);

  const jobspec::TrainingSpec& t = s.training;
  v1::TrainingSpec* pt = p.mutable_training();
  pt->set_steps(t.steps);
  pt->set_epochs(t.epochs);
  pt->set_global_batch(t.global_batch);
  pt->set_microbatch(t.microbatch);
  pt->set_seq_len(t.seq_len);
  pt->set_lr(t.lr);
  pt->set_min_lr(t.min_lr);
  pt->set_warmup_steps(t.warmup_steps);
  pt->set_lr_schedule(t.lr_schedule);
  pt->set_weight_decay(t.weight_decay);
  pt->set_grad_clip(t.grad_clip);
  pt->set_beta1(t.beta1);
  pt->set_beta2(t.beta2);
  pt->set_eps(t.eps);
  pt->set_seed(t.seed);
  pt->set_eval_every(t.eval_every);
  pt->set_optimizer_staleness(static_cast<int32_t>(t.optimizer_staleness));
  pt->set_precision(t.precision);

  p.mutable_resources()->set_gpus(s.resources.gpus);
  p.mutable_resources()->set_device_memory_bytes(s.resources.device_memory_bytes);

  v1::PlanSpec* plan = p.mutable_plan();
  plan->set_schedule(s.plan.schedule);
  plan->set_partitioner(s.plan.partitioner);
  plan->set_mapper(s.plan.mapper);
  plan->set_stages(s.plan.stages);
  plan->set_dispatch(s.plan.dispatch);

  p.mutable_checkpoint()->set_dir(s.checkpoint.dir);
  p.mutable_checkpoint()->set_every_steps(s.checkpoint.every_steps);
  p.mutable_checkpoint()->set_keep_last(s.checkpoint.keep_last);
  p.mutable_checkpoint()->set_group(s.checkpoint.group);
  p.set_max_restarts(s.max_restarts);
  if (s.adapter.has_value()) {
    const jobspec::AdapterSpec& a = *s.adapter;
    v1::AdapterSpec* pa = p.mutable_adapter();
    pa->set_type(a.type);
    pa->set_rank(a.rank);
    pa->set_alpha(a.alpha);
    pa->set_dropout(a.dropout);
    for (const std::string& target : a.target_modules) pa->add_target_modules(target);
    pa->set_init_from(a.init_from);
    pa->set_base_quantization(a.base_quantization);
  }
  return p;
}

jobspec::JobSpec JobSpecFromProto(const v1::JobSpec& p) {
  const jobspec::JobSpec defaults;
  jobspec::JobSpec s;
  s.name = p.name();
  s.labels.insert(p.labels().begin(), p.labels().end());
  s.priority = p.priority();
  s.model_dir = p.model_dir();

  s.dataset.path = p.dataset().path();
  s.dataset.format = OrDefault(p.dataset().format(), defaults.dataset.format);
  s.dataset.tokenizer = p.dataset().tokenizer();
  s.dataset.eval_fraction = p.dataset().eval_fraction();
  const v1::DatasetSpec& pd = p.dataset();
  const jobspec::DatasetSpec& dd = defaults.dataset;
  s.dataset.paths.assign(pd.paths().begin(), pd.paths().end());
  s.dataset.text_field = OrDefault(pd.text_field(), dd.text_field);
  s.dataset.prompt_field = OrDefault(pd.prompt_field(), dd.prompt_field);
  s.dataset.completion_field = OrDefault(pd.completion_field(), dd.completion_field);
  s.dataset.messages_field = OrDefault(pd.messages_field(), dd.messages_field);
  s.dataset.chat_template = OrDefault(pd.chat_template(), dd.chat_template);
  s.dataset.chat_template_kwargs.insert(pd.chat_template_kwargs().begin(),
                                        pd.chat_template_kwargs().end());
  s.dataset.skip_bad_lines = pd.skip_bad_lines();

  const v1::TrainingSpec& pt = p.training();
  const jobspec::TrainingSpec& dt = defaults.training;
  jobspec::TrainingSpec& t = s.training;
  t.steps = pt.steps();
  t.epochs = pt.epochs();
  t.global_batch = pt.global_batch();
  t.microbatch = pt.microbatch();
  t.seq_len = pt.seq_len();
  t.lr = pt.has_lr() ? pt.lr() : dt.lr;
  t.min_lr = pt.min_lr();
  t.warmup_steps = pt.warmup_steps();
  t.lr_schedule = OrDefault(pt.lr_schedule(), dt.lr_schedule);
  t.weight_decay = pt.weight_decay();
  t.grad_clip = pt.has_grad_clip() ? pt.grad_clip() : dt.grad_clip;
  t.beta1 = pt.has_beta1() ? pt.beta1() : dt.beta1;
  t.beta2 = pt.has_beta2() ? pt.beta2() : dt.beta2;
  t.eps = pt.has_eps() ? pt.eps() : dt.eps;
  t.seed = pt.seed();
  t.eval_every = pt.eval_every();
  t.optimizer_staleness = pt.optimizer_staleness();
  t.precision = OrDefault(pt.precision(), dt.precision);

  s.resources.gpus = p.resources().gpus();
  s.resources.device_memory_bytes = p.resources().device_memory_bytes();

  s.plan.schedule = OrDefault(p.plan().schedule(), defaults.plan.schedule);
  s.plan.partitioner = OrDefault(p.plan().partitioner(), defaults.plan.partitioner);
  s.plan.mapper = OrDefault(p.plan().mapper(), defaults.plan.mapper);
  s.plan.stages = p.plan().stages();
  s.plan.dispatch = OrDefault(p.plan().dispatch(), defaults.plan.dispatch);

  s.checkpoint.dir = p.checkpoint().dir();
  s.checkpoint.every_steps = p.checkpoint().every_steps();
  s.checkpoint.keep_last =
      p.checkpoint().has_keep_last() ? p.checkpoint().keep_last() : defaults.checkpoint.keep_last;
  s.checkpoint.group = p.checkpoint().group();
  s.max_restarts = p.has_max_restarts() ? p.max_restarts() : defaults.max_restarts;
  if (p.has_adapter()) {
    // The type stays as sent: an empty one is the validator's "adapter.type: required".
    const v1::AdapterSpec& pa = p.adapter();
    const jobspec::AdapterSpec da;
    jobspec::AdapterSpec& a = s.adapter.emplace();
    a.type = pa.type();
    a.rank = pa.has_rank() ? pa.rank() : da.rank;
    a.alpha = pa.has_alpha() ? pa.alpha() : da.alpha;
    a.dropout = pa.dropout();
    a.target_modules.assign(pa.target_modules().begin(), pa.target_modules().end());
    a.init_from = pa.init_from();
    a.base_quantization = pa.base_quantization();
  }
  return s;
}

}  // namespace mobius
