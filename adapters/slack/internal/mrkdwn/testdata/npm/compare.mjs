// Reads a JSON array of {md, ours} from stdin; writes a JSON array of
// {ref, oursHTML, refHTML}: slackify-markdown's mrkdwn for md (a reference
// converter), and slack-markdown's HTML for our mrkdwn and for the
// reference's (a second mrkdwn parser). Used by TestNodeReference.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { slackifyMarkdown } from "slackify-markdown";

const require = createRequire(import.meta.url);
const { toHTML } = require("slack-markdown");

const cases = JSON.parse(readFileSync(0, "utf8"));
const out = cases.map(({ md, ours }) => {
  const ref = slackifyMarkdown(md);
  return { ref, oursHTML: toHTML(ours), refHTML: toHTML(ref) };
});
process.stdout.write(JSON.stringify(out));
