// Validates each OpenRPC document named on the command line with the OpenRPC
// project's validator, then checks that a broken copy of the first is refused.
const fs = require("fs");
const { validateOpenRPCDocument } = require("@open-rpc/schema-utils-js");

function validate(document) {
  const outcome = validateOpenRPCDocument(document);
  return outcome === true ? null : outcome;
}

let failed = false;
const files = process.argv.slice(2);
for (const file of files) {
  const document = JSON.parse(fs.readFileSync(file, "utf8"));
  const error = validate(document);
  if (error) {
    failed = true;
    console.error(`FAIL ${file}: ${error.message || error}`);
  } else {
    console.log(`ok   ${file}: openrpc ${document.openrpc}, ${document.methods.length} methods`);
  }
}

const broken = JSON.parse(fs.readFileSync(files[0], "utf8"));
broken.methods[0].params = [{ schema: { type: "number" } }]; // a param with no name
delete broken.info;
if (validate(broken)) {
  console.log("ok   a broken document is refused");
} else {
  failed = true;
  console.error("FAIL a broken document (no info, a nameless param) passed validation");
}
process.exit(failed ? 1 : 0);
