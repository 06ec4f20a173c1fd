#!/bin/bash
# addid.sh TAG ID  -> rules stopTAG, checkTAG, msgTAG
cat >> /tmp/qa-sub/script.toml <<EOT

[[rule]]
name = "stop$1"
match = "^stop$1\$"
steps = [
  { tool = "StopSubagent", args = { id = "$2" } },
  { tool = "SendMessage", args = { text = "STOP {{tool_result}}" } },
]

[[rule]]
name = "check$1"
match = "^check$1\$"
steps = [
  { tool = "CheckSubagent", args = { id = "$2" } },
  { tool = "SendMessage", args = { text = "CHECK1 {{tool_result}}" } },
]

[[rule]]
name = "msg$1"
match = "^msg$1\$"
steps = [
  { tool = "MessageSubagent", args = { id = "$2", text = "STEER please do more" } },
  { tool = "SendMessage", args = { text = "MSG {{tool_result}}" } },
]

[[rule]]
name = "sta$1"
match = "^sta$1\$"
steps = [
  { tool = "SendToAgent", args = { agent = "$2", text = "hello sub" } },
  { tool = "SendMessage", args = { text = "STA {{tool_result}}" } },
]
EOT
