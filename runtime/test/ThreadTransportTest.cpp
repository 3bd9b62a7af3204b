//===- ThreadTransportTest.cpp - mailboxes of the in-process transport -----===//
//
// Matching on (from, to, tag, kind, micro-batch) whatever the order of sends
// and receives, FIFO per key, receive timeouts that honour their deadline, a
// stop that wakes every waiter at once, and the barrier.
//
//===----------------------------------------------------------------------===//
#include "TestSupport.h"

#include "ThreadTransport.h"

#include <chrono>
#include <cstring>
#include <thread>

using namespace piperun;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int receiveInt(Transport &t, const MessageKey &key, double timeout = 5) {
  int value = -1;
  bool got = t.receive(key, timeout, [&](size_t size) {
    EXPECT_EQ(size, sizeof(int));
    return static_cast<void *>(&value);
  });
  EXPECT_TRUE(got);
  return value;
}

TEST(ThreadTransport, MatchesByKeyInAnyOrderAndKeepsOrderPerKey) {
  ThreadHub hub(2);
  auto zero = hub.transport(0), one = hub.transport(1);
  const int values[] = {10, 11, 12, 13, 14, 15};
  const MessageKey keys[] = {
      {0, 1, 3, PIPE_TRANSFER_ACTIVATION, 0}, {0, 1, 3, PIPE_TRANSFER_ACTIVATION, 1},
      {0, 1, 3, PIPE_TRANSFER_GRADIENT, 0},   {0, 1, 4, PIPE_TRANSFER_ACTIVATION, 0},
      {0, 1, 3, PIPE_TRANSFER_ACTIVATION, 0}, {0, 1, 9, PIPE_TRANSFER_PARAM, -1}};
  std::vector<std::unique_ptr<PendingSend>> sends;
  for (int i = 0; i < 6; ++i)
    sends.push_back(zero->send(keys[i], &values[i], sizeof(int)));
  EXPECT_FALSE(sends[0]->done()) << "not received yet";
  EXPECT_EQ(receiveInt(*one, keys[5]), 15);
  EXPECT_EQ(receiveInt(*one, keys[3]), 13);
  EXPECT_EQ(receiveInt(*one, keys[0]), 10) << "first of the two with this key";
  EXPECT_EQ(receiveInt(*one, keys[2]), 12);
  EXPECT_EQ(receiveInt(*one, keys[1]), 11);
  EXPECT_EQ(receiveInt(*one, keys[0]), 14) << "then the second";
  for (auto &send : sends)
    EXPECT_TRUE(send->done());
  EXPECT_FALSE(one->unreceived().has_value());
}

TEST(ThreadTransport, ReceiverWaitsForALateSender) {
  ThreadHub hub(2);
  auto zero = hub.transport(0), one = hub.transport(1);
  const int value = 77;
  MessageKey key{0, 1, 1, PIPE_TRANSFER_ACTIVATION, 2};
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto pending = zero->send(key, &value, sizeof value);
    while (!pending->done())
      std::this_thread::yield();
  });
  EXPECT_EQ(receiveInt(*one, key), 77);
  sender.join();
}

TEST(ThreadTransport, AWaitingSenderLearnsAtOnceThatItsMessageWasTaken) {
  // Rank 0 sends, then waits for an answer that comes 300 ms after rank 1 takes
  // the message: the wait calls `taken` when the take happens (the rank frees
  // its buffer then), not after the answer.
  ThreadHub hub(2);
  auto zero = hub.transport(0), one = hub.transport(1);
  const int value = 5, answer = 6;
  const MessageKey out{0, 1, 1, PIPE_TRANSFER_ACTIVATION, 0};
  const MessageKey back{1, 0, 1, PIPE_TRANSFER_GRADIENT, 0};
  auto pending = zero->send(out, &value, sizeof value);
  // The take happens inside the receive: between takingAt and tookAt.
  std::atomic<double> takingAt{-1}, tookAt{-1};
  const auto start = Clock::now();
  std::thread peer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    takingAt = secondsSince(start);
    EXPECT_EQ(receiveInt(*one, out), 5);
    tookAt = secondsSince(start);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto reply = one->send(back, &answer, sizeof answer);
    while (!reply->done())
      std::this_thread::yield();
  });
  double doneSeenAt = -1;
  int got = -1;
  EXPECT_TRUE(zero->receive(
      back, 5,
      [&](size_t) { return static_cast<void *>(&got); },
      [&] {
        if (doneSeenAt < 0 && pending->done())
          doneSeenAt = secondsSince(start);
      }));
  const double answeredAt = secondsSince(start);
  peer.join();
  EXPECT_EQ(got, 6);
  ASSERT_GE(doneSeenAt, 0) << "the wait never reported the take";
  EXPECT_GE(doneSeenAt, takingAt.load());
  EXPECT_LT(doneSeenAt, tookAt.load() + 0.2) << "answer at " << answeredAt << " s";
  EXPECT_GE(answeredAt, tookAt.load() + 0.29);
}

TEST(ThreadTransport, TimeoutHonoursTheDeadline) {
  ThreadHub hub(2);
  auto one = hub.transport(1);
  auto start = Clock::now();
  bool got = one->receive({0, 1, 5, PIPE_TRANSFER_ACTIVATION, 0}, 0.3,
                          [](size_t) -> void * { return nullptr; });
  double waited = secondsSince(start);
  EXPECT_FALSE(got);
  EXPECT_GE(waited, 0.29);
  EXPECT_LT(waited, 1.5);
}

TEST(ThreadTransport, StopWakesWaitersAtOnce) {
  ThreadHub hub(3);
  auto one = hub.transport(1), two = hub.transport(2);
  std::atomic<int> stopped{0};
  auto start = Clock::now();
  std::thread receiver([&] {
    try {
      one->receive({0, 1, 5, PIPE_TRANSFER_ACTIVATION, 0}, 30,
                   [](size_t) -> void * { return nullptr; });
    } catch (const Stopped &) {
      ++stopped;
    }
  });
  std::thread waiter([&] {
    try {
      two->barrier(30);
    } catch (const Stopped &) {
      ++stopped;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  hub.stop();
  receiver.join();
  waiter.join();
  EXPECT_EQ(stopped, 2);
  EXPECT_LT(secondsSince(start), 2.0);
  EXPECT_THROW(one->checkStopped(), Stopped);
}

TEST(ThreadTransport, BarrierWaitsForEveryRankAndTimesOut) {
  ThreadHub hub(3);
  std::vector<std::unique_ptr<Transport>> t;
  for (int k = 0; k < 3; ++k)
    t.push_back(hub.transport(k));
  std::atomic<int> passed{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 3; ++k)
    threads.emplace_back([&, k] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50 * k));
      passed += t[k]->barrier(5);
    });
  for (auto &thread : threads)
    thread.join();
  EXPECT_EQ(passed, 3);
  auto start = Clock::now();
  EXPECT_FALSE(t[0]->barrier(0.2)) << "the others never come";
  EXPECT_LT(secondsSince(start), 1.0);
}

} // namespace
