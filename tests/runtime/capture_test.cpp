// The bounded output capture: the first and last halves of the budget survive, the middle is counted.
#include <gtest/gtest.h>

#include <string>

#include "worker/process.hpp"

namespace kgate {
namespace {

TEST(OutputCapture, ShortOutputIsKeptWhole) {
  OutputCapture c(16);
  c.append("hello ", 6);
  c.append("world", 5);
  EXPECT_EQ(c.excerpt(), "hello world");
  EXPECT_EQ(c.total(), 11u);
}

TEST(OutputCapture, LongOutputKeepsHeadAndTailAndCountsTheRest) {
  OutputCapture c(8);  // 4 bytes of head, 4 of tail
  const std::string text = "abcdefghijklmnopqrstuvwxyz";
  for (char ch : text) c.append(&ch, 1);  // byte by byte, as a slow writer would arrive
  EXPECT_EQ(c.excerpt(), "abcd\n[... 18 bytes not shown ...]\nwxyz");
  EXPECT_EQ(c.total(), 26u);
  OutputCapture once(8);
  once.append(text.data(), text.size());  // and in one piece
  EXPECT_EQ(once.excerpt(), c.excerpt());
  c.clear();
  EXPECT_EQ(c.excerpt(), "");
  EXPECT_EQ(c.total(), 0u);
}

}  // namespace
}  // namespace kgate
