# loadtest/email-get-request.sh: sourced by wrk-email-get.sh and floor-ratio.sh.
#
# email_get_request URL LEVEL LUA: the Email/get of 30 ids (user1's newest)
# at LEVEL from the fastview serving at URL, as AUTH (Basic, base64); sets
# BODY to the request and writes the wrk script posting it to LUA. LEVEL:
#   open      textBody, htmlBody, attachments, bodyValues, fetchAllBodyValues
#             (the message a user opens: the "full" row of issue 15)
#   fastview  the list view's properties (issue 20)
#   metadata  mailboxIds and keywords
email_get_request() {
  local url=$1 level=$2 lua=$3 properties fetch account query
  case $level in
    open) properties='["id","textBody","htmlBody","attachments","bodyValues"]'; fetch=true ;;
    fastview) properties='["id","threadId","mailboxIds","keywords","hasAttachment","from","to","subject","receivedAt","size","preview"]'; fetch=false ;;
    metadata) properties='["id","mailboxIds","keywords"]'; fetch=false ;;
    *) echo "unknown level $level" >&2; return 2 ;;
  esac
  account=$(curl -s -H "Authorization: Basic $AUTH" "$url/.well-known/jmap" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["primaryAccounts"]["urn:ietf:params:jmap:mail"])')
  query=$(curl -s -H "Authorization: Basic $AUTH" -H 'Content-Type: application/json' "$url/jmap/api" \
    -d "{\"using\":[\"urn:ietf:params:jmap:core\",\"urn:ietf:params:jmap:mail\"],\"methodCalls\":[[\"Email/query\",{\"accountId\":\"$account\",\"limit\":30,\"sort\":[{\"property\":\"receivedAt\",\"isAscending\":false}]},\"q\"]]}")
  BODY=$(python3 -c '
import json, sys
ids = json.loads(sys.argv[1])["methodResponses"][0][1]["ids"]
print(json.dumps({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
  "methodCalls": [["Email/get", {"accountId": sys.argv[2], "ids": ids,
    "properties": json.loads(sys.argv[3]), "fetchAllBodyValues": sys.argv[4] == "true"}, "g"]]}))
' "$query" "$account" "$properties" "$fetch")
  python3 - "$BODY" "$AUTH" > "$lua" <<'EOF'
import json, sys
print('wrk.method = "POST"')
print('wrk.body = ' + json.dumps(sys.argv[1]))
print('wrk.headers["Content-Type"] = "application/json"')
print('wrk.headers["Authorization"] = "Basic ' + sys.argv[2] + '"')
EOF
}
