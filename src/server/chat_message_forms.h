// The form in which a model's chat template can take an assistant's tool-call message. Clients send
// `content: null` and the arguments as JSON text. transformers passes both through as sent; vLLM
// turns null into "" and parses the arguments into a mapping. Real templates need different ones:
// Qwen3's first release raises on a null content ('</think>' in None); DeepSeek-V3's renders tool
// calls only when `content is none` and concatenates the arguments as text; Llama 3.1's and
// Qwen2.5's expect a mapping (`arguments | tojson`). So the server renders four probe
// conversations once (as llama.cpp's minja does for the same reason) and gives each template the
// form it renders: as sent where it can, vLLM's where it must.
#pragma once

#include <string>

#include "server/openai_request.h"

namespace pagoda {
class ChatTemplate;
}

namespace pagoda::server {

struct ToolCallForms {
  bool null_content = true;      // an assistant's null (or absent) content reaches the template as None, else as ""
  bool object_arguments = true;  // arguments text is parsed into a mapping (as vLLM), else passed as the text sent
};

// The first form, in the order (None, mapping), (None, text), ("", mapping), ("", text), whose
// probe conversation renders with the probe's argument value in it; failing that the first that
// renders at all; failing that (None, mapping). Never throws.
ToolCallForms probe_tool_call_forms(const ChatTemplate& tmpl, const std::string& bos_token, const std::string& eos_token);

// The request's messages in that form: an assistant's null or absent content becomes None or "";
// with mapping arguments, text arguments become json.loads of it ({} when not JSON, as vLLM) and
// arguments that are neither text, a mapping nor a list become {}. Throws ApiError 400 for
// arguments text nesting deeper than kMaxChatNesting or holding an integer beyond 64 bits.
Json adapt_messages(const Json& messages, const ToolCallForms& forms);

}  // namespace pagoda::server
