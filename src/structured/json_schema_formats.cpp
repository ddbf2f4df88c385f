#include "structured/json_schema_formats.h"

#include <map>

namespace pagoda::structured {
namespace {

// Lengths of each format are bounded (labels, segments and counts capped) so that a format
// combined with minLength/maxLength can be checked against them at compile time.
const char* kPrimitives = R"(ws ::= (" " | "\n" [ ]{0,16})?
json-char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
json-string ::= "\"" json-char* "\""
json-int ::= "-"? ("0" | [1-9] [0-9]{0,15})
json-uint ::= "0" | [1-9] [0-9]{0,15}
json-frac-exp ::= ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
json-number ::= json-int json-frac-exp
json-boolean ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" ws (json-string ws ":" ws json-value (ws "," ws json-string ws ":" ws json-value)*)? ws "}"
json-array ::= "[" ws (json-value (ws "," ws json-value)*)? ws "]"
fmt-year ::= [1-9] [0-9]{3} | "0" ([1-9] [0-9]{2} | "0" ([1-9] [0-9] | "0" [1-9]))
fmt-date ::= fmt-year "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8]))
fmt-time ::= ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])
fmt-date-time ::= "\"" fmt-date "T" fmt-time "\""
fmt-date-only ::= "\"" fmt-date "\""
fmt-time-only ::= "\"" fmt-time "\""
hex ::= [0-9a-fA-F]
fmt-uuid ::= "\"" hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12} "\""
email-label ::= [a-zA-Z0-9] ([a-zA-Z0-9-]{0,30} [a-zA-Z0-9])?
fmt-email ::= "\"" [a-zA-Z0-9._+-]{1,32} "@" email-label ("." email-label){0,3} "." [a-zA-Z]{2,8} "\""
ip-octet ::= "25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]
ipv4 ::= ip-octet "." ip-octet "." ip-octet "." ip-octet
fmt-ipv4 ::= "\"" ipv4 "\""
fmt-ipv6 ::= "\"" hex{1,4} (":" hex{1,4}){7} "\""
host-label ::= [a-zA-Z0-9] ([a-zA-Z0-9-]{0,18} [a-zA-Z0-9])?
host-top ::= [a-zA-Z] ([a-zA-Z0-9-]{0,18} [a-zA-Z0-9])?
hostname ::= (host-label "."){0,7} host-top
fmt-hostname ::= "\"" hostname "\""
uri-pchar ::= [a-zA-Z0-9._~!$&'()*+,;=:@-]
uri ::= [a-zA-Z] [a-zA-Z0-9+.-]{0,9} "://" (hostname | ipv4) (":" [1-9] [0-9]{0,3})? ("/" uri-pchar{0,16}){0,8} ("?" (uri-pchar | "/"){0,32})? ("#" (uri-pchar | "/"){0,16})?
fmt-uri ::= "\"" uri "\""
json-pointer ::= ("/" [a-zA-Z0-9_.-]{0,16}){0,8}
fmt-json-pointer ::= "\"" json-pointer "\""
fmt-relative-json-pointer ::= "\"" ("0" | [1-9] [0-9]{0,3}) ("#" | json-pointer) "\""
fmt-regex ::= "\"" [a-zA-Z0-9 _-]{0,32} "\""
fmt-duration ::= "\"P" [1-9] [0-9]{0,3} [YMWD] "\""
)";

}  // namespace

const char* json_schema_primitives() { return kPrimitives; }

std::optional<FormatRule> format_rule(const std::string& f) {
  // The uri rule is also a valid uri-reference, iri, iri-reference and uri-template (it has no
  // braces); idn forms accept their ASCII forms.
  static const std::map<std::string, FormatRule> known = {
      {"date-time", {"fmt-date-time", 20, 35}},
      {"date", {"fmt-date-only", 10, 10}},
      {"time", {"fmt-time-only", 9, 21}},
      {"uuid", {"fmt-uuid", 36, 36}},
      {"email", {"fmt-email", 6, 173}},
      {"idn-email", {"fmt-email", 6, 173}},
      {"ipv4", {"fmt-ipv4", 7, 15}},
      {"ipv6", {"fmt-ipv6", 15, 39}},
      {"hostname", {"fmt-hostname", 1, 167}},
      {"idn-hostname", {"fmt-hostname", 1, 167}},
      {"uri", {"fmt-uri", 4, 379}},
      {"uri-reference", {"fmt-uri", 4, 379}},
      {"iri", {"fmt-uri", 4, 379}},
      {"iri-reference", {"fmt-uri", 4, 379}},
      {"uri-template", {"fmt-uri", 4, 379}},
      {"json-pointer", {"fmt-json-pointer", 0, 136}},
      {"relative-json-pointer", {"fmt-relative-json-pointer", 2, 140}},
      {"regex", {"fmt-regex", 0, 32}},
      {"duration", {"fmt-duration", 3, 6}},
  };
  auto it = known.find(f);
  if (it == known.end()) return std::nullopt;
  return it->second;
}

}  // namespace pagoda::structured
