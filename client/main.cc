// mobius: the command-line client of mobiusd.
//
//   mobius topo [--topology-file FILE] [--json | --xml]   the server's GPU/PCIe/NUMA topology
//   mobius plan --model DIR [--topology-file FILE] [--batch --microbatch --seq --schedule
//               --partitioner --mapper --gpus 0,1 --link-scale S] [--json] [--trace out.json]
//   mobius health                                         is the daemon serving?
//   connection (every daemon verb): --socket PATH | --daemon tcp://HOST:PORT [--tls_ca --tls_cert
//               --tls_key --tls_server_name --token_file] (client/daemon_endpoint.h)
//   mobius submit|ls|describe|logs|watch|cancel|queue|node|drain|undrain|quota   jobs
//                                                         (client/job_commands.h)
//   mobius export --merge ADAPTER_DIR OUT [--base DIR] [--dtype bf16|fp32|auto]
//                                                         a LoRA adapter merged into its base,
//                                                         no daemon (client/export_command.h)
//   mobius generate MODEL_DIR [--adapter DIR] (--prompt TEXT | --prompt_ids 1,2,3)
//               --max_new_tokens N [--temperature T --top_p P --seed S]
//                                                         text with a KV cache, no daemon
//                                                         (client/generate_command.h)
//
//   mobius --help | help                                 the global usage (client/verb_help.h)
//   mobius VERB --help | help VERB                        the verb's usage and flags
//
// Exit codes: 0 ok, 1 job failed, 2 usage or invalid input, 3 daemon unreachable, 4 daemon error
// (export: the merge failed; generate: generation failed).
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "client/daemon_client.h"
#include "client/exit_codes.h"
#include "client/export_command.h"
#include "client/generate_command.h"
#include "client/job_commands.h"
#include "client/flags.h"
#include "client/node_world.h"
#include "client/plan_command.h"
#include "client/run_command.h"
#include "client/tokenize_command.h"
#include "client/topo_command.h"
#include "client/verb_help.h"
#include "common/init.h"

namespace {

absl::Duration Timeout() { return absl::Seconds(absl::GetFlag(FLAGS_timeout_seconds)); }

// The daemon's address and credentials from the connection flags and environment.
absl::StatusOr<mobius::cli::DaemonEndpoint> Endpoint() {
  mobius::cli::EndpointFlags f;
  f.daemon = absl::GetFlag(FLAGS_daemon);
  f.socket = absl::GetFlag(FLAGS_socket);
  f.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  f.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  f.tls_key = absl::GetFlag(FLAGS_tls_key);
  f.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  f.token_file = absl::GetFlag(FLAGS_token_file);
  return mobius::cli::ResolveDaemonEndpoint(f);
}

// Sets `out` from the connection flags and environment; the exit code when they are invalid.
std::optional<int> ResolveDaemon(mobius::cli::DaemonEndpoint& out) {
  absl::StatusOr<mobius::cli::DaemonEndpoint> endpoint = Endpoint();
  if (!endpoint.ok()) {
    std::cerr << "mobius: " << endpoint.status().message() << "\n";
    return mobius::cli::kExitUsage;
  }
  out = *std::move(endpoint);
  return std::nullopt;
}

int RunHealth() {
  mobius::cli::DaemonEndpoint endpoint;
  if (std::optional<int> rc = ResolveDaemon(endpoint)) return *rc;
  auto client = mobius::cli::DaemonClient::For(endpoint, Timeout());
  absl::StatusOr<std::string> status = client->Health();
  if (!status.ok()) {
    std::cerr << "mobius health: " << status.status().message() << "\n";
    return mobius::cli::ExitCodeFor(status.status());
  }
  std::cout << *status << "\n";
  return *status == "SERVING" ? mobius::cli::kExitOk : mobius::cli::kExitServerError;
}

int RunPlanCommand() {
  mobius::cli::PlanCommandOptions o;
  o.model = absl::GetFlag(FLAGS_model);
  o.topology_file = absl::GetFlag(FLAGS_topology_file);
  if (o.topology_file.empty()) {
    if (std::optional<int> rc = ResolveDaemon(o.daemon)) return *rc;
  }
  o.timeout = Timeout();
  o.batch = absl::GetFlag(FLAGS_batch);
  o.microbatch = absl::GetFlag(FLAGS_microbatch);
  o.seq = absl::GetFlag(FLAGS_seq);
  o.schedule = absl::GetFlag(FLAGS_schedule);
  o.partitioner = absl::GetFlag(FLAGS_partitioner);
  o.mapper = absl::GetFlag(FLAGS_mapper);
  o.optimizer_staleness = absl::GetFlag(FLAGS_optimizer_staleness);
  o.dispatch = absl::GetFlag(FLAGS_dispatch);
  o.precision = absl::GetFlag(FLAGS_precision);
  o.clip = absl::GetFlag(FLAGS_clip);
  o.lora = absl::GetFlag(FLAGS_lora);
  o.lora_rank = absl::GetFlag(FLAGS_lora_rank);
  o.lora_targets = absl::GetFlag(FLAGS_lora_targets);
  o.lora_base = absl::GetFlag(FLAGS_lora_base);
  o.gpus = absl::GetFlag(FLAGS_gpus);
  o.gpu_memory_gib = absl::GetFlag(FLAGS_gpu_memory_gib);
  o.host_memory_gib = absl::GetFlag(FLAGS_host_memory_gib);
  o.emulated_gpus = absl::GetFlag(FLAGS_emulated_gpus);
  o.efficiency = absl::GetFlag(FLAGS_efficiency);
  o.peak_tflops = absl::GetFlag(FLAGS_peak_tflops);
  o.mip_time_limit_seconds = absl::GetFlag(FLAGS_mip_time_limit_seconds);
  o.link_scale = absl::GetFlag(FLAGS_link_scale);
  o.nodes = absl::GetFlag(FLAGS_nodes);
  o.internode_gbps = absl::GetFlag(FLAGS_internode_gbps);
  o.internode_latency_us = absl::GetFlag(FLAGS_internode_latency_us);
  o.allreduce_bucket_mib = absl::GetFlag(FLAGS_allreduce_bucket_mib);
  o.json = absl::GetFlag(FLAGS_json);
  o.trace = absl::GetFlag(FLAGS_trace);
  o.longest = absl::GetFlag(FLAGS_longest);
  return mobius::cli::RunPlan(o, std::cout, std::cerr);
}

// `mobius --help`, `mobius help`: the global usage; `mobius VERB --help`, `mobius help VERB`: the
// verb's usage and flags. `verb` is empty for the global usage.
int PrintHelp(const std::string& verb) {
  if (verb.empty() || verb == "help") {
    std::cout << mobius::cli::GlobalUsage() << "\n";
    return mobius::cli::kExitOk;
  }
  if (std::optional<std::string> help = mobius::cli::VerbHelp(verb)) {
    std::cout << *help;
    return mobius::cli::kExitOk;
  }
  std::cerr << "mobius: unknown command '" << verb << "'\n" << mobius::cli::GlobalUsage() << "\n";
  return mobius::cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  // absl's own --help lists only the flags defined in main.cc (none): take the help flags out
  // before parsing and answer them here, per verb.
  mobius::HelpRequest help = mobius::TakeHelpFlags(argc, argv);
  std::vector<std::string> args = mobius::InitProcess(static_cast<int>(help.argv.size()) - 1,
                                                      help.argv.data(), mobius::cli::GlobalUsage());
  const bool help_flag = help.asked;
  if (help_flag) return PrintHelp(args.size() >= 2 ? args[1] : "");
  if (args.size() >= 2 && args[1] == "help") return PrintHelp(args.size() >= 3 ? args[2] : "");
  if (args.size() >= 4 && args[1] == "tokenize") {  // mobius tokenize IN [IN...] OUT
    mobius::cli::TokenizeOptions o;
    o.inputs.assign(args.begin() + 2, args.end() - 1);
    o.output = args.back();
    o.tokenizer_dir = absl::GetFlag(FLAGS_tokenizer);
    o.format = absl::GetFlag(FLAGS_format);
    o.text_field = absl::GetFlag(FLAGS_text_field);
    o.prompt_field = absl::GetFlag(FLAGS_prompt_field);
    o.completion_field = absl::GetFlag(FLAGS_completion_field);
    o.messages_field = absl::GetFlag(FLAGS_messages_field);
    o.chat_template = absl::GetFlag(FLAGS_chat_template);
    o.chat_template_kwargs = absl::GetFlag(FLAGS_chat_template_kwargs);
    o.skip_bad_lines = absl::GetFlag(FLAGS_skip_bad_lines);
    o.eos_id = absl::GetFlag(FLAGS_eos_id);
    o.threads = absl::GetFlag(FLAGS_threads);
    return mobius::cli::RunTokenize(o, std::cout, std::cerr);
  }
  if (args.size() >= 2 && args[1] == "export") {  // mobius export --merge ADAPTER_DIR OUT
    mobius::cli::ExportOptions o;
    o.merge = absl::GetFlag(FLAGS_merge);
    o.args.assign(args.begin() + 2, args.end());
    o.base_dir = absl::GetFlag(FLAGS_base);
    o.dtype = absl::GetFlag(FLAGS_dtype);
    o.worker_binary = absl::GetFlag(FLAGS_worker_binary);
    return mobius::cli::RunExport(o, std::cout, std::cerr);
  }
  if (args.size() >= 2 && args[1] == "generate") {  // mobius generate MODEL_DIR ...
    mobius::cli::GenerateOptions o;
    o.args.assign(args.begin() + 2, args.end());
    o.adapter_dir = absl::GetFlag(FLAGS_adapter);
    o.lora_base = absl::GetFlag(FLAGS_lora_base);
    o.prompt = absl::GetFlag(FLAGS_prompt);
    o.prompt_ids = absl::GetFlag(FLAGS_prompt_ids);
    o.chat = absl::GetFlag(FLAGS_chat);
    o.system = absl::GetFlag(FLAGS_system);
    o.chat_template_kwargs = absl::GetFlag(FLAGS_chat_template_kwargs);
    o.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
    o.expert_residency = absl::GetFlag(FLAGS_expert_residency);
    o.expert_cache_bytes = absl::GetFlag(FLAGS_expert_cache_bytes);
    o.temperature = absl::GetFlag(FLAGS_temperature);
    o.top_p = absl::GetFlag(FLAGS_top_p);
    o.seed = absl::GetFlag(FLAGS_seed);
    o.backend = absl::GetFlag(FLAGS_backend);
    o.threads = absl::GetFlag(FLAGS_threads);
    o.worker_binary = absl::GetFlag(FLAGS_worker_binary);
    return mobius::cli::RunGenerate(o, std::cout, std::cerr);
  }
  if (args.size() == 3 && args[1] == "plan") {  // mobius plan JOB.yaml
    mobius::cli::PlanCommandOptions o;
    o.topology_file = absl::GetFlag(FLAGS_topology_file);
    if (o.topology_file.empty()) {
      if (std::optional<int> rc = ResolveDaemon(o.daemon)) return *rc;
    }
    o.timeout = Timeout();
    o.gpus = absl::GetFlag(FLAGS_gpus);
    o.json = absl::GetFlag(FLAGS_json);
    o.trace = absl::GetFlag(FLAGS_trace);
    o.longest = absl::GetFlag(FLAGS_longest);
    o.efficiency = absl::GetFlag(FLAGS_efficiency);
    o.peak_tflops = absl::GetFlag(FLAGS_peak_tflops);
    o.emulated_gpus = absl::GetFlag(FLAGS_emulated_gpus);
    o.host_memory_gib = absl::GetFlag(FLAGS_host_memory_gib);
    o.link_scale = absl::GetFlag(FLAGS_link_scale);
    // Several nodes: the spec's global batch over N nodes (what `mobius run` on N nodes runs).
    o.nodes = absl::GetFlag(FLAGS_nodes);
    o.internode_gbps = absl::GetFlag(FLAGS_internode_gbps);
    o.internode_latency_us = absl::GetFlag(FLAGS_internode_latency_us);
    o.allreduce_bucket_mib = absl::GetFlag(FLAGS_allreduce_bucket_mib);
    return mobius::cli::RunPlanSpec(args[2], o, std::cout, std::cerr);
  }
  if (args.size() >= 2 && args[1] == "run") {
    if (args.size() != 3) {
      std::cerr << "usage: mobius run JOB.yaml [--topology-file F] [--gpus 0,1] [--link-scale S] "
                   "[--resume] [--nodes N --node-rank R --rendezvous HOST:PORT]\n";
      return mobius::cli::kExitUsage;
    }
    mobius::cli::RunCommandOptions o;
    o.spec_path = args[2];
    o.topology_file = absl::GetFlag(FLAGS_topology_file);
    o.gpus = absl::GetFlag(FLAGS_gpus);
    o.run_dir = absl::GetFlag(FLAGS_run_dir);
    o.link_scale = absl::GetFlag(FLAGS_link_scale);
    o.emulate_links = absl::GetFlag(FLAGS_emulate_links);
    o.backend = absl::GetFlag(FLAGS_backend);
    o.transport = absl::GetFlag(FLAGS_transport);
    o.resume = absl::GetFlag(FLAGS_resume);
    absl::StatusOr<int> nodes = mobius::cli::ParseRunNodesFlag(absl::GetFlag(FLAGS_nodes));
    if (!nodes.ok()) {
      std::cerr << "mobius run: " << nodes.status().message() << "\n";
      return mobius::cli::kExitUsage;
    }
    o.nodes = *nodes;
    o.node_rank = absl::GetFlag(FLAGS_node_rank);
    o.rendezvous = absl::GetFlag(FLAGS_rendezvous);
    o.node_timeout_seconds = absl::GetFlag(FLAGS_node_timeout);
    o.internode_gbps = absl::GetFlag(FLAGS_internode_gbps);
    o.internode_latency_us = absl::GetFlag(FLAGS_internode_latency_us);
    o.allreduce_bucket_mib = absl::GetFlag(FLAGS_allreduce_bucket_mib);
    o.report_file = absl::GetFlag(FLAGS_report_file);
    return mobius::cli::RunRunCommand(o, std::cout, std::cerr);
  }
  if (args.size() >= 2 && mobius::cli::IsJobVerb(args[1])) {
    mobius::cli::JobCommandOptions o;
    if (std::optional<int> rc = ResolveDaemon(o.daemon)) return *rc;
    o.timeout = Timeout();
    o.stream_idle = absl::Seconds(absl::GetFlag(FLAGS_stream_idle_seconds));
    o.json = absl::GetFlag(FLAGS_json);
    o.wait = absl::GetFlag(FLAGS_wait);
    o.follow = absl::GetFlag(FLAGS_follow) || absl::GetFlag(FLAGS_f);
    o.submission_id = absl::GetFlag(FLAGS_submission_id);
    o.state = absl::GetFlag(FLAGS_state);
    o.max_gpus = absl::GetFlag(FLAGS_max_gpus);
    o.max_running_jobs = absl::GetFlag(FLAGS_max_running_jobs);
    o.max_queued_jobs = absl::GetFlag(FLAGS_max_queued_jobs);
    o.max_host_memory = absl::GetFlag(FLAGS_max_host_memory);
    o.user = absl::GetFlag(FLAGS_user);
    o.since = absl::GetFlag(FLAGS_since);
    o.runs = absl::GetFlag(FLAGS_runs);
    return mobius::cli::RunJobCommand({args.begin() + 1, args.end()}, o, std::cout, std::cerr);
  }
  if (args.size() != 2) {
    std::cerr << mobius::cli::GlobalUsage() << "\n";
    return mobius::cli::kExitUsage;
  }
  const std::string& command = args[1];
  if (command == "topo") {
    mobius::cli::TopoOptions o;
    o.topology_file = absl::GetFlag(FLAGS_topology_file);
    if (o.topology_file.empty()) {
      if (std::optional<int> rc = ResolveDaemon(o.daemon)) return *rc;
    }
    o.timeout = Timeout();
    o.json = absl::GetFlag(FLAGS_json);
    o.xml = absl::GetFlag(FLAGS_xml);
    return mobius::cli::RunTopo(o, std::cout, std::cerr);
  }
  if (command == "plan") return RunPlanCommand();
  if (command == "health") return RunHealth();
  std::cerr << "mobius: unknown command '" << command << "'\n"
            << mobius::cli::GlobalUsage() << "\n";
  return mobius::cli::kExitUsage;
}
