#include "client/export_command.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/exit_codes.h"
#include "client/worker_child.h"

namespace mobius::cli {
namespace {

// What `mobius-worker merge-adapter` prints (worker/checkpoint/merge_adapter_command.h; the CLI
// cannot include the worker's headers).
constexpr absl::string_view kWorkerPrefix = "mobius-worker merge-adapter: ";
constexpr absl::string_view kMergedPrefix = "@merged ";

// "merged ADAPTER into BASE: ..." from the worker's summary line.
std::string Summary(const std::string& adapter, const std::string& out_dir,
                    const std::string& worker_out) {
  const size_t at = worker_out.find(std::string(kMergedPrefix));
  if (at == std::string::npos) return absl::StrCat("merged ", adapter, " -> ", out_dir);
  const size_t start = at + kMergedPrefix.size();
  const nlohmann::json j = nlohmann::json::parse(
      worker_out.substr(start, worker_out.find('\n', start) - start), nullptr, false);
  if (!j.is_object()) return absl::StrCat("merged ", adapter, " -> ", out_dir);
  std::vector<std::string> files;
  for (const auto& f : j.value("files", nlohmann::json::array())) {
    if (f.is_string()) files.push_back(f.get<std::string>());
  }
  return absl::StrCat("merged ", adapter, " into ", j.value("base", std::string("?")), ": ",
                      j.value("merged_modules", 0), " adapted weights (scaling ",
                      j.value("scaling", 0.0), "), ", j.value("tensors", 0), " tensors, dtype ",
                      j.value("dtype", std::string("?")), "\nwrote ", out_dir, ": ",
                      absl::StrJoin(files, ", "));
}

}  // namespace

int RunExport(const ExportOptions& o, std::ostream& out, std::ostream& err) {
  auto usage = [&](const std::string& what) {
    err << "mobius export: " << what << "\nusage: " << kExportUsage << "\n";
    return kExitUsage;
  };
  if (!o.merge) return usage("say what to export: --merge (a LoRA adapter merged into its base)");
  if (o.args.size() != 2) return usage("expected ADAPTER_DIR and OUT");
  if (o.dtype != "bf16" && o.dtype != "fp32" && o.dtype != "auto") {
    return usage(absl::StrCat("--dtype must be bf16, fp32 or auto (got \"", o.dtype, "\")"));
  }
  const std::string& adapter = o.args[0];
  const std::string& out_dir = o.args[1];
  std::vector<std::string> argv = {WorkerBinaryNextToSelf(o.worker_binary), "merge-adapter", "--adapter=" + adapter,
                                   "--out=" + out_dir, "--dtype=" + o.dtype};
  if (!o.base_dir.empty()) argv.push_back("--base=" + o.base_dir);

  std::string worker_out;
  absl::StatusOr<WorkerChildResult> r = RunWorkerChild(
      argv, kWorkerPrefix, [&](absl::string_view chunk) { worker_out.append(chunk.data(), chunk.size()); },
      [&](const std::string& warning) { err << "mobius export: " << warning << "\n"; });
  if (!r.ok()) {
    err << "mobius export: cannot run " << argv[0] << " (" << r.status().message()
        << "); build mobius-worker next to mobius or pass --worker_binary\n";
    return kExitServerError;
  }
  const int code = FinishWorkerChild(*r, "export", "the merge process", err);
  if (code == kExitOk) out << Summary(adapter, out_dir, worker_out) << "\n";
  return code;
}

}  // namespace mobius::cli
