// test_numbers.cpp — nn/numbers.h: numbers a user wrote are read whole, or refused.
#include <gtest/gtest.h>

#include "nn/numbers.h"

TEST(Numbers, AWholeNumberIsReadWholeOrRefused) {
  EXPECT_EQ(nn::parse_whole("2"), 2);
  EXPECT_EQ(nn::parse_whole("-7"), -7);
  EXPECT_EQ(nn::parse_whole("9223372036854775807"), INT64_MAX);
  for (const char* bad : {"", "2x", " 2", "2 ", "+2", "2.0", "0x10", "9223372036854775808", "99999999999999999999999"})
    EXPECT_FALSE(nn::parse_whole(bad).has_value()) << "'" << bad << "'";
  // 2^32 + 5 is not 5: a range the caller asks for refuses it instead of wrapping it
  EXPECT_FALSE(nn::parse_whole("4294967301", 0, INT32_MAX).has_value());
  EXPECT_EQ(nn::parse_whole("4294967301"), 4294967301);
  EXPECT_FALSE(nn::parse_whole("-1", 0).has_value());
}

TEST(Numbers, ARealNumberMustBeFinite) {
  EXPECT_EQ(nn::parse_finite("0.5"), 0.5);
  EXPECT_EQ(nn::parse_finite("1e-3"), 1e-3);
  EXPECT_EQ(nn::parse_finite("-2"), -2.0);
  for (const char* bad : {"", "1e400", "-1e400", "nan", "inf", "-inf", "1.5s", " 1", "1,5"})
    EXPECT_FALSE(nn::parse_finite(bad).has_value()) << "'" << bad << "'";
}
