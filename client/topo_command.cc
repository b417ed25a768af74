#include "client/topo_command.h"

#include "client/daemon_client.h"
#include "client/exit_codes.h"
#include "google/protobuf/util/json_util.h"
#include "host/topology/topology_convert.h"
#include "host/topology/analysis.h"
#include "host/topology/hwloc_source.h"
#include "host/topology/render.h"

namespace mobius::cli {
namespace {

struct Fetched {
  v1::Topology proto;
  std::string hwloc_xml;
};

absl::StatusOr<Fetched> FromFile(const std::string& path) {
  auto loaded = topology::MakeHwlocXmlFileSource(path)->Load();
  if (!loaded.ok()) return loaded.status();
  Fetched f;
  f.proto = TopologyToProto(loaded->topology, topology::Analyze(loaded->topology));
  f.hwloc_xml = std::move(loaded->hwloc_xml);
  return f;
}

absl::StatusOr<Fetched> FromDaemon(const TopoOptions& o) {
  auto client = DaemonClient::For(o.daemon, o.timeout);
  auto resp = client->GetTopology(o.xml);
  if (!resp.ok()) return resp.status();
  return Fetched{std::move(*resp->mutable_topology()), std::move(*resp->mutable_hwloc_xml())};
}

}  // namespace

int RunTopo(const TopoOptions& o, std::ostream& out, std::ostream& err) {
  if (o.json && o.xml) {
    err << "mobius topo: --json and --xml are mutually exclusive\n";
    return kExitUsage;
  }
  absl::StatusOr<Fetched> fetched = o.topology_file.empty() ? FromDaemon(o) : FromFile(o.topology_file);
  if (!fetched.ok()) {
    err << "mobius topo: " << fetched.status().message() << "\n";
    return ExitCodeFor(fetched.status());
  }
  if (o.xml) {
    out << fetched->hwloc_xml;
    return kExitOk;
  }
  if (o.json) {
    std::string json;
    google::protobuf::util::JsonPrintOptions opts;
    opts.add_whitespace = true;
    opts.always_print_primitive_fields = true;
    opts.preserve_proto_field_names = true;
    auto s = google::protobuf::util::MessageToJsonString(fetched->proto, &json, opts);
    if (!s.ok()) {
      err << "mobius topo: cannot encode JSON: " << s.ToString() << "\n";
      return kExitServerError;
    }
    out << json;
    return kExitOk;
  }
  absl::StatusOr<topology::Topology> t = TopologyFromProto(fetched->proto);
  if (!t.ok()) {
    err << "mobius topo: the daemon sent an inconsistent topology: " << t.status().message() << "\n";
    return kExitServerError;
  }
  out << topology::RenderTopology(*t, topology::Analyze(*t));
  return kExitOk;
}

}  // namespace mobius::cli
