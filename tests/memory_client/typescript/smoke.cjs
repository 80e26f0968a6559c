// The CommonJS build, from the same installed package.
const { MemsiteClient } = require("memsite-client");

new MemsiteClient()
  .getContext(process.argv[2])
  .then((context) => console.log(JSON.stringify(context.messages)))
  .catch((error) => {
    console.error(error);
    process.exit(1);
  });
