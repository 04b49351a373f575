// Service discovery on a real 3-member etcd cluster across hosts (docs/cluster.md): members
// e1..e3 on three hosts, cluster_server on three more, the client on its own host.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "cluster_fixture.h"
#include "etcd_cluster.h"
#include "fmt/format.h"

namespace cluster_test {
namespace {

using namespace std::chrono_literals;

class EtcdTest : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (const std::string why = EtcdCluster::unavailable(); !why.empty()) {
      GTEST_SKIP() << "etcd scenarios skipped: " << why;
    }
    std::string why;
    etcd_ = std::make_unique<EtcdCluster>(network(), 3, &why);
    ASSERT_TRUE(etcd_->started()) << why;
  }
  void TearDown() override {
    etcd_.reset();
    ClusterTest::TearDown();
  }

  std::unique_ptr<EtcdCluster> etcd_;
};

// Stop a follower, then the leader: with one member of three left the cluster has no quorum and
// refuses writes; once a member returns, writes are accepted again.
TEST_F(EtcdTest, QuorumLostAndRegained) {
  const int leader = etcd_->leader(client());
  ASSERT_GE(leader, 0) << "no leader among the three members";
  ASSERT_TRUE(etcd_->put(client(), "/probe", "1", 2s));
  const std::size_t follower = leader == 0 ? 1 : 0;
  etcd_->kill(follower);
  EXPECT_TRUE(etcd_->put(client(), "/probe", "2", 2s)) << "two members of three are a quorum";
  etcd_->kill(static_cast<std::size_t>(leader));
  EXPECT_FALSE(etcd_->put(client(), "/probe", "3", 1s)) << "one member of three is no quorum";
  std::string why;
  ASSERT_TRUE(etcd_->start(follower, &why)) << why;
  EXPECT_TRUE(etcd_->put(client(), "/probe", "4", 5s)) << "a quorum is back";
  EXPECT_GE(etcd_->leader(client()), 0);
}

}  // namespace
}  // namespace cluster_test
