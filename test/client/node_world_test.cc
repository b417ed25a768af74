// ResolveNodeWorld's precedence (flags > MOBIUS_* > Slurm > Kubernetes > one node) and errors,
// and the Slurm host list expressions it takes the rendezvous host from.
#include "client/node_world.h"

#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace mobius::cli {
namespace {

using Env = absl::flat_hash_map<std::string, std::string>;

// What srun gives each task of `srun --nodes=2 --ntasks-per-node=1` (the parts we read).
Env SlurmStep(int rank, int ntasks = 2) {
  return {{"SLURM_JOB_ID", "4242"},
          {"SLURM_NTASKS", std::to_string(ntasks)},
          {"SLURM_NNODES", std::to_string(ntasks)},
          {"SLURM_PROCID", std::to_string(rank)},
          {"SLURM_NODEID", std::to_string(rank)},
          {"SLURM_JOB_NODELIST", "gpu[07-08]"}};
}

// Expects INVALID_ARGUMENT with every one of `parts` in the message.
void ExpectInvalid(const absl::StatusOr<NodeWorld>& w, std::vector<std::string> parts) {
  ASSERT_FALSE(w.ok()) << "resolved to node " << w->node_rank << " of " << w->nodes;
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument) << w.status();
  for (const std::string& p : parts) {
    EXPECT_TRUE(absl::StrContains(w.status().message(), p))
        << "'" << p << "' not in: " << w.status().message();
  }
}

TEST(NodeWorld, NothingIsOneNode) {
  absl::StatusOr<NodeWorld> w = ResolveNodeWorld({}, {{"HOME", "/root"}});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->nodes, 1);
  EXPECT_EQ(w->node_rank, 0);
  EXPECT_EQ(w->rendezvous_host, "");
  EXPECT_EQ(w->rendezvous_port, 0);
  EXPECT_EQ(w->job_key, "");
  EXPECT_EQ(w->source, "single");
}

TEST(NodeWorld, Flags) {
  absl::StatusOr<NodeWorld> w =
      ResolveNodeWorld({.nodes = 3, .node_rank = 2, .rendezvous = "head.example:1234"}, {});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->nodes, 3);
  EXPECT_EQ(w->node_rank, 2);
  EXPECT_EQ(w->rendezvous_host, "head.example");
  EXPECT_EQ(w->rendezvous_port, 1234);
  EXPECT_EQ(w->source, "flags");
  // The port is optional; MOBIUS_RENDEZVOUS_PORT changes the default.
  w = ResolveNodeWorld({.nodes = 2, .node_rank = 0, .rendezvous = "10.0.0.1"}, {});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->rendezvous_host, "10.0.0.1");
  EXPECT_EQ(w->rendezvous_port, kDefaultRendezvousPort);
  w = ResolveNodeWorld({.nodes = 2, .node_rank = 0, .rendezvous = "10.0.0.1"},
                       {{"MOBIUS_RENDEZVOUS_PORT", "7000"}});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->rendezvous_port, 7000);
  // IPv6 in brackets.
  w = ResolveNodeWorld({.nodes = 2, .node_rank = 1, .rendezvous = "[fd00::1]:99"}, {});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->rendezvous_host, "fd00::1");
  EXPECT_EQ(w->rendezvous_port, 99);
  // --nodes 1 alone is one node, whatever the environment says.
  w = ResolveNodeWorld({.nodes = 1}, SlurmStep(1));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->nodes, 1);
  EXPECT_EQ(w->node_rank, 0);
  EXPECT_EQ(w->source, "flags");
  EXPECT_EQ(w->rendezvous_host, "");
}

TEST(NodeWorld, FlagsTakeTheRendezvousFromTheEnvironment) {
  absl::StatusOr<NodeWorld> w =
      ResolveNodeWorld({.nodes = 2, .node_rank = 1}, {{"MOBIUS_RENDEZVOUS", "n0:5000"}});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->rendezvous_host, "n0");
  EXPECT_EQ(w->rendezvous_port, 5000);
  EXPECT_EQ(w->source, "flags");
}

TEST(NodeWorld, FlagErrors) {
  ExpectInvalid(ResolveNodeWorld({.nodes = 2, .node_rank = 3, .rendezvous = "h"}, {}),
                {"--node-rank 3 is outside 0..1 for --nodes 2"});
  ExpectInvalid(ResolveNodeWorld({.nodes = 2, .node_rank = -5, .rendezvous = "h"}, {}),
                {"--node-rank -5 is outside 0..1 for --nodes 2"});
  ExpectInvalid(ResolveNodeWorld({.nodes = 1, .node_rank = 1}, {}),
                {"--node-rank 1 is outside 0..0 for --nodes 1"});
  ExpectInvalid(ResolveNodeWorld({.nodes = 2, .rendezvous = "h"}, {}),
                {"--nodes 2 needs --node-rank (0..1)"});
  ExpectInvalid(ResolveNodeWorld({.node_rank = 1}, SlurmStep(1)), {"--node-rank 1 needs --nodes"});
  ExpectInvalid(ResolveNodeWorld({.nodes = 2, .node_rank = 0}, {}),
                {"--nodes 2 but no rendezvous", "--rendezvous HOST:PORT", "MOBIUS_RENDEZVOUS"});
  ExpectInvalid(ResolveNodeWorld({.nodes = 1025, .node_rank = 0, .rendezvous = "h"}, {}),
                {"--nodes 1025 is outside 1..1024"});
  ExpectInvalid(ResolveNodeWorld({.nodes = -2, .node_rank = 0, .rendezvous = "h"}, {}),
                {"--nodes -2 is outside 1..1024"});
  ExpectInvalid(ResolveNodeWorld({.nodes = 2, .node_rank = 0, .rendezvous = "h:0"}, {}),
                {"--rendezvous=\"h:0\"", "the port \"0\" is not in 1..65535"});
  ExpectInvalid(ResolveNodeWorld({.nodes = 2, .node_rank = 0, .rendezvous = "h:70000"}, {}),
                {"not in 1..65535"});
  ExpectInvalid(ResolveNodeWorld({.nodes = 2, .node_rank = 0, .rendezvous = "h:"}, {}),
                {"the port \"\""});
  ExpectInvalid(ResolveNodeWorld({.nodes = 2, .node_rank = 0, .rendezvous = ":80"}, {}),
                {"empty host"});
  ExpectInvalid(ResolveNodeWorld({.nodes = 2, .node_rank = 0, .rendezvous = "fd00::1"}, {}),
                {"IPv6 address in brackets"});
  ExpectInvalid(ResolveNodeWorld({.nodes = 2, .node_rank = 0, .rendezvous = "[fd00::1"}, {}),
                {"no ']'"});
  ExpectInvalid(ResolveNodeWorld({.nodes = 2, .node_rank = 0, .rendezvous = "[x]:1"}, {}),
                {"not an IPv6 address"});
  ExpectInvalid(ResolveNodeWorld({.nodes = 2, .node_rank = 0, .rendezvous = "a b:1"}, {}),
                {"only letters, digits"});
  ExpectInvalid(ResolveNodeWorld({.nodes = 2, .node_rank = 0, .rendezvous = "h"},
                                 {{"MOBIUS_RENDEZVOUS_PORT", "x"}}),
                {"MOBIUS_RENDEZVOUS_PORT=\"x\"", "not in 1..65535"});
}

TEST(NodeWorld, MobiusVariables) {
  absl::StatusOr<NodeWorld> w = ResolveNodeWorld(
      {}, {{"MOBIUS_NODES", "4"}, {"MOBIUS_NODE_RANK", "3"}, {"MOBIUS_RENDEZVOUS", "n0"},
           {"MOBIUS_JOB_KEY", "sweep-7"}});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->nodes, 4);
  EXPECT_EQ(w->node_rank, 3);
  EXPECT_EQ(w->rendezvous_host, "n0");
  EXPECT_EQ(w->rendezvous_port, kDefaultRendezvousPort);
  EXPECT_EQ(w->job_key, "sweep-7");
  EXPECT_EQ(w->source, "MOBIUS_*");
  // MOBIUS_NODES=1 is one node; "" is unset.
  w = ResolveNodeWorld({}, {{"MOBIUS_NODES", "1"}, {"MOBIUS_RENDEZVOUS", ""}});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->nodes, 1);
  EXPECT_EQ(w->source, "MOBIUS_*");
  w = ResolveNodeWorld({}, {{"MOBIUS_NODES", ""}, {"MOBIUS_NODE_RANK", ""}});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->source, "single");
}

TEST(NodeWorld, MobiusVariableErrors) {
  ExpectInvalid(ResolveNodeWorld({}, {{"MOBIUS_NODES", "2"}, {"MOBIUS_NODE_RANK", "0"}}),
                {"MOBIUS_NODES=2 but no rendezvous: set MOBIUS_RENDEZVOUS=HOST:PORT"});
  ExpectInvalid(ResolveNodeWorld({}, {{"MOBIUS_NODES", "two"}}),
                {"MOBIUS_NODES=\"two\" is not an integer"});
  ExpectInvalid(ResolveNodeWorld({}, {{"MOBIUS_NODES", " 2"}}), {"is not an integer"});
  ExpectInvalid(ResolveNodeWorld({}, {{"MOBIUS_NODES", "0"}}), {"MOBIUS_NODES=0 is outside 1..1024"});
  ExpectInvalid(ResolveNodeWorld({}, {{"MOBIUS_NODES", "2000"}}), {"outside 1..1024"});
  ExpectInvalid(ResolveNodeWorld({}, {{"MOBIUS_NODES", "99999999999"}}), {"not an integer"});
  ExpectInvalid(ResolveNodeWorld({}, {{"MOBIUS_NODES", "2"}, {"MOBIUS_RENDEZVOUS", "h"}}),
                {"MOBIUS_NODES=2 but no node rank", "MOBIUS_NODE_RANK"});
  ExpectInvalid(ResolveNodeWorld({}, {{"MOBIUS_NODES", "2"}, {"MOBIUS_NODE_RANK", "2"},
                                      {"MOBIUS_RENDEZVOUS", "h"}}),
                {"MOBIUS_NODE_RANK=2 is outside 0..1 for MOBIUS_NODES=2"});
  ExpectInvalid(ResolveNodeWorld({}, {{"MOBIUS_NODES", "1"}, {"MOBIUS_NODE_RANK", "1"}}),
                {"MOBIUS_NODE_RANK=1 is outside 0..0 for MOBIUS_NODES=1"});
  ExpectInvalid(ResolveNodeWorld({}, {{"MOBIUS_NODES", "2"}, {"MOBIUS_NODE_RANK", "x"},
                                      {"MOBIUS_RENDEZVOUS", "h"}}),
                {"MOBIUS_NODE_RANK=\"x\" is not an integer"});
  ExpectInvalid(ResolveNodeWorld({}, {{"MOBIUS_NODE_RANK", "1"}}),
                {"MOBIUS_NODE_RANK=\"1\" needs MOBIUS_NODES"});
  ExpectInvalid(ResolveNodeWorld({}, {{"MOBIUS_NODES", "2"}, {"MOBIUS_NODE_RANK", "0"},
                                      {"MOBIUS_RENDEZVOUS", "h:port"}}),
                {"MOBIUS_RENDEZVOUS=\"h:port\"", "not in 1..65535"});
  ExpectInvalid(ResolveNodeWorld({}, {{"MOBIUS_JOB_KEY", "a b"}}),
                {"MOBIUS_JOB_KEY=\"a b\"", "letters, digits"});
}

TEST(NodeWorld, Slurm) {
  for (int rank : {0, 1}) {
    absl::StatusOr<NodeWorld> w = ResolveNodeWorld({}, SlurmStep(rank));
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->nodes, 2);
    EXPECT_EQ(w->node_rank, rank);
    EXPECT_EQ(w->rendezvous_host, "gpu07");
    EXPECT_EQ(w->rendezvous_port, kDefaultRendezvousPort);
    EXPECT_EQ(w->job_key, "slurm-4242");
    EXPECT_EQ(w->source, "slurm");
  }
  // SLURM_NODELIST when SLURM_JOB_NODELIST is missing; the step's own list first; a port variable.
  Env env = SlurmStep(1);
  env.erase("SLURM_JOB_NODELIST");
  env["SLURM_NODELIST"] = "a-b[3-4]";
  env["MOBIUS_RENDEZVOUS_PORT"] = "31000";
  absl::StatusOr<NodeWorld> w = ResolveNodeWorld({}, env);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->rendezvous_host, "a-b3");
  EXPECT_EQ(w->rendezvous_port, 31000);
  env["SLURM_STEP_NODELIST"] = "c[5,9]";
  env["SLURM_STEP_NUM_NODES"] = "2";
  env["SLURM_NNODES"] = "6";  // the allocation is larger than the step
  w = ResolveNodeWorld({}, env);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->rendezvous_host, "c5");
  // MOBIUS_RENDEZVOUS overrides the node list; MOBIUS_JOB_KEY the job id.
  env["MOBIUS_RENDEZVOUS"] = "ib-head:4000";
  env["MOBIUS_JOB_KEY"] = "mine";
  w = ResolveNodeWorld({}, env);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->rendezvous_host, "ib-head");
  EXPECT_EQ(w->rendezvous_port, 4000);
  EXPECT_EQ(w->job_key, "mine");
  EXPECT_EQ(w->source, "slurm");
  // One task is one node (no rendezvous needed); so is an allocation shell (no step variables).
  w = ResolveNodeWorld({}, SlurmStep(0, 1));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->nodes, 1);
  EXPECT_EQ(w->source, "slurm");
  EXPECT_EQ(w->job_key, "slurm-4242");
  w = ResolveNodeWorld({}, {{"SLURM_JOB_ID", "9"}, {"SLURM_JOB_NODELIST", "n[1-2]"}});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->nodes, 1);
  EXPECT_EQ(w->source, "single");
  EXPECT_EQ(w->job_key, "slurm-9");
}

TEST(NodeWorld, SlurmErrors) {
  Env env = SlurmStep(0);
  env["SLURM_PROCID"] = "x";
  ExpectInvalid(ResolveNodeWorld({}, env), {"SLURM_PROCID=\"x\" is not an integer"});
  env = SlurmStep(0);
  env["SLURM_PROCID"] = "2";
  ExpectInvalid(ResolveNodeWorld({}, env), {"SLURM_PROCID=2 is outside 0..1 for SLURM_NTASKS=2"});
  env = SlurmStep(0, 4);
  env["SLURM_NNODES"] = "2";  // --ntasks-per-node=2
  ExpectInvalid(ResolveNodeWorld({}, env), {"SLURM_NTASKS=4", "SLURM_NNODES=2",
                                            "--ntasks-per-node=1"});
  env = SlurmStep(0);
  env["SLURM_NNODES"] = "0";
  ExpectInvalid(ResolveNodeWorld({}, env), {"SLURM_NNODES=0 is not positive"});
  env = SlurmStep(0);
  env.erase("SLURM_NNODES");
  ExpectInvalid(ResolveNodeWorld({}, env), {"SLURM_NNODES is unset"});
  env = SlurmStep(0);
  env.erase("SLURM_PROCID");  // salloc's shell: tasks asked for, but not in a step
  ExpectInvalid(ResolveNodeWorld({}, env), {"SLURM_NTASKS=2 but SLURM_PROCID is unset", "srun"});
  env = SlurmStep(0);
  env.erase("SLURM_NTASKS");
  ExpectInvalid(ResolveNodeWorld({}, env), {"SLURM_NTASKS is not"});
  env = SlurmStep(0);
  env["SLURM_NTASKS"] = "2048";
  ExpectInvalid(ResolveNodeWorld({}, env), {"SLURM_NTASKS=2048 is outside 1..1024"});
  env = SlurmStep(0);
  env.erase("SLURM_JOB_NODELIST");
  ExpectInvalid(ResolveNodeWorld({}, env),
                {"SLURM_NTASKS=2 but no rendezvous", "MOBIUS_RENDEZVOUS=HOST:PORT"});
  env = SlurmStep(0);
  env["SLURM_JOB_NODELIST"] = "gpu[07-";
  ExpectInvalid(ResolveNodeWorld({}, env), {"SLURM_JOB_NODELIST", "no ']'"});
  env = SlurmStep(0);
  env["SLURM_JOB_ID"] = "12 34";
  ExpectInvalid(ResolveNodeWorld({}, env), {"SLURM_JOB_ID=\"12 34\""});
}

TEST(NodeWorld, KubernetesIndexedJob) {
  const Env pod = {{"JOB_COMPLETION_INDEX", "1"},
                   {"MOBIUS_NODES", "2"},
                   {"MOBIUS_RENDEZVOUS", "mobius-multinode-0.mobius-multinode:29560"}};
  absl::StatusOr<NodeWorld> w = ResolveNodeWorld({}, pod);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->nodes, 2);
  EXPECT_EQ(w->node_rank, 1);
  EXPECT_EQ(w->rendezvous_host, "mobius-multinode-0.mobius-multinode");
  EXPECT_EQ(w->rendezvous_port, 29560);
  EXPECT_EQ(w->source, "kubernetes");
  // MOBIUS_NODE_RANK wins over the index.
  Env env = pod;
  env["MOBIUS_NODE_RANK"] = "0";
  w = ResolveNodeWorld({}, env);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->node_rank, 0);
  EXPECT_EQ(w->source, "MOBIUS_*");
  // Independent single-node pods of an Indexed Job say MOBIUS_NODES=1.
  w = ResolveNodeWorld({}, {{"JOB_COMPLETION_INDEX", "5"}, {"MOBIUS_NODES", "1"}});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->nodes, 1);
  EXPECT_EQ(w->node_rank, 0);
}

TEST(NodeWorld, KubernetesErrors) {
  ExpectInvalid(ResolveNodeWorld({}, {{"JOB_COMPLETION_INDEX", "1"}}),
                {"JOB_COMPLETION_INDEX=\"1\"", "MOBIUS_NODES is unset", "MOBIUS_NODES=1"});
  ExpectInvalid(ResolveNodeWorld({}, {{"JOB_COMPLETION_INDEX", "2"}, {"MOBIUS_NODES", "2"},
                                      {"MOBIUS_RENDEZVOUS", "h"}}),
                {"JOB_COMPLETION_INDEX=2 is outside 0..1 for MOBIUS_NODES=2"});
  ExpectInvalid(ResolveNodeWorld({}, {{"JOB_COMPLETION_INDEX", "1"}, {"MOBIUS_NODES", "2"}}),
                {"MOBIUS_NODES=2 but no rendezvous: set MOBIUS_RENDEZVOUS=HOST:PORT"});
}

TEST(NodeWorld, Precedence) {
  const Env mobius = {{"MOBIUS_NODES", "3"}, {"MOBIUS_NODE_RANK", "2"},
                      {"MOBIUS_RENDEZVOUS", "m:1"}};
  Env all = SlurmStep(1);
  all.insert(mobius.begin(), mobius.end());
  all["JOB_COMPLETION_INDEX"] = "0";
  // Flags over everything (the rendezvous flag over MOBIUS_RENDEZVOUS).
  absl::StatusOr<NodeWorld> w =
      ResolveNodeWorld({.nodes = 4, .node_rank = 3, .rendezvous = "f:2"}, all);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->source, "flags");
  EXPECT_EQ(w->nodes, 4);
  EXPECT_EQ(w->node_rank, 3);
  EXPECT_EQ(w->rendezvous_host, "f");
  EXPECT_EQ(w->job_key, "slurm-4242");
  // MOBIUS_* over Slurm and Kubernetes.
  w = ResolveNodeWorld({}, all);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->source, "MOBIUS_*");
  EXPECT_EQ(w->nodes, 3);
  EXPECT_EQ(w->node_rank, 2);
  EXPECT_EQ(w->rendezvous_host, "m");
  // Slurm over Kubernetes' index.
  Env slurm_k8s = SlurmStep(1);
  slurm_k8s["JOB_COMPLETION_INDEX"] = "0";
  w = ResolveNodeWorld({}, slurm_k8s);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->source, "slurm");
  EXPECT_EQ(w->node_rank, 1);
  // --rendezvous overrides Slurm's node list.
  w = ResolveNodeWorld({.rendezvous = "r:3"}, SlurmStep(0));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->source, "slurm");
  EXPECT_EQ(w->rendezvous_host, "r");
  EXPECT_EQ(w->rendezvous_port, 3);
}

TEST(NodeWorld, RunNodesFlag) {
  EXPECT_EQ(*ParseRunNodesFlag(""), 0);
  EXPECT_EQ(*ParseRunNodesFlag("2"), 2);
  EXPECT_EQ(ParseRunNodesFlag("1,2").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(ParseRunNodesFlag("1,2").status().message(),
                                "--nodes \"1,2\" is not one node count"));
  EXPECT_TRUE(absl::StrContains(ParseRunNodesFlag("0").status().message(),
                                "--nodes 0 is outside 1..1024"));
}

std::string Expanded(absl::string_view list) {
  absl::StatusOr<std::vector<std::string>> hosts = ExpandSlurmHostlist(list);
  return hosts.ok() ? absl::StrJoin(*hosts, ",") : "error: " + std::string(hosts.status().message());
}

TEST(SlurmHostlist, FirstHost) {
  EXPECT_EQ(*FirstSlurmHost("node[01-04,07],gpu5"), "node01");
  EXPECT_EQ(*FirstSlurmHost("a-b[3]"), "a-b3");
  EXPECT_EQ(*FirstSlurmHost("n1"), "n1");
  EXPECT_EQ(*FirstSlurmHost("gpu5,node[01-04]"), "gpu5");
  EXPECT_EQ(*FirstSlurmHost("r[2-3]n[08-09]-ib"), "r2n08-ib");
  EXPECT_EQ(*FirstSlurmHost("n[7,1-3]"), "n7");  // the first as written
  EXPECT_EQ(*FirstSlurmHost("node.cluster_a"), "node.cluster_a");
  // Not expanded: a huge list still has a first host.
  EXPECT_EQ(*FirstSlurmHost("n[1-999999999]"), "n1");
}

TEST(SlurmHostlist, Expand) {
  EXPECT_EQ(Expanded("n[1-3]"), "n1,n2,n3");
  EXPECT_EQ(Expanded("n[08-10]"), "n08,n09,n10");
  EXPECT_EQ(Expanded("n[8-10]"), "n8,n9,n10");
  EXPECT_EQ(Expanded("n[001-002,010]"), "n001,n002,n010");
  EXPECT_EQ(Expanded("node[01-02,07],gpu5"), "node01,node02,node07,gpu5");
  EXPECT_EQ(Expanded("r[1-2]n[3-4]"), "r1n3,r1n4,r2n3,r2n4");
  EXPECT_EQ(Expanded("n[1-2]-ib,x"), "n1-ib,n2-ib,x");
  EXPECT_EQ(Expanded("a,b,c"), "a,b,c");
  EXPECT_EQ(Expanded("n[5]"), "n5");
}

TEST(SlurmHostlist, ExpandCount) {
  absl::StatusOr<std::vector<std::string>> hosts = ExpandSlurmHostlist("n[1-65536]");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_EQ(hosts->size(), 65536u);
  EXPECT_EQ(hosts->back(), "n65536");
  for (const char* big : {"n[1-65537]", "n[1-65536],x", "r[1-300]n[1-300]",
                          "n[1-999999999999999999]", "r[1-100000000]n[1-100000000]"}) {
    EXPECT_TRUE(absl::StrContains(Expanded(big), "more than 65536 hosts")) << big;
  }
}

TEST(SlurmHostlist, Malformed) {
  for (const char* bad : {"", ",", "a,", ",a", "a,,b", "n[", "n[1-", "n]", "n[]", "n[1-2",
                          "n[2-1]", "n[a-b]", "n[1-2-3]", "n[1,]", "n[,1]", "n[-1]", "n[1-]",
                          "n[[1]]", "n [1]", "a b", "n\t1", "n[1]]", "n[1234567890123456789]",
                          "n/1", "n:1"}) {
    absl::StatusOr<std::vector<std::string>> hosts = ExpandSlurmHostlist(bad);
    EXPECT_FALSE(hosts.ok()) << "'" << bad << "' -> " << Expanded(bad);
    if (!hosts.ok()) {
      EXPECT_EQ(hosts.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_TRUE(absl::StrContains(hosts.status().message(), "Slurm host list"));
    }
    EXPECT_FALSE(FirstSlurmHost(bad).ok()) << bad;
  }
}

// Random text (mostly host list characters) never crashes either function, and the two agree.
TEST(SlurmHostlist, RandomTextNeverCrashes) {
  std::mt19937 rng(20);
  const std::string alphabet = "n0123456789[]-,.,_[]-0a ";
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    const int len = rng() % 24;
    for (int j = 0; j < len; ++j) {
      s.push_back(rng() % 16 == 0 ? static_cast<char>(rng() % 256)
                                  : alphabet[rng() % alphabet.size()]);
    }
    absl::StatusOr<std::string> first = FirstSlurmHost(s);
    absl::StatusOr<std::vector<std::string>> all = ExpandSlurmHostlist(s);
    if (all.ok()) {
      ASSERT_TRUE(first.ok()) << s;
      ASSERT_FALSE(all->empty()) << s;
      EXPECT_EQ(all->front(), *first) << s;
    } else if (!absl::StrContains(all.status().message(), "more than")) {
      EXPECT_FALSE(first.ok()) << s;
    }
  }
}

TEST(NodeWorld, ProcessEnvironmentReadsEnviron) {
  setenv("MOBIUS_NODE_WORLD_TEST", "a=b", 1);
  const absl::flat_hash_map<std::string, std::string> env = ProcessEnvironment();
  auto it = env.find("MOBIUS_NODE_WORLD_TEST");
  ASSERT_NE(it, env.end());
  EXPECT_EQ(it->second, "a=b");
}

}  // namespace
}  // namespace mobius::cli
