// GPT-2's byte-level alphabet: every byte is shown as a printable character (bytes_to_unicode), so
// that BPE can work on text while covering all 256 byte values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda::byte_level {

// The code point that stands for byte b.
uint32_t byte_to_codepoint(uint8_t b);

// That code point as UTF-8 (one or two bytes).
std::string_view byte_to_utf8(uint8_t b);

// Maps every byte of raw to its character.
std::string encode(std::string_view raw);

// Undoes encode() for one token: true and the bytes appended to out when every character of
// token is in the alphabet; false (out unchanged) otherwise, in which case Hugging Face's ByteLevel
// decoder keeps the token's own UTF-8 bytes.
bool decode(std::string_view token, std::string& out);

}  // namespace pagoda::byte_level
