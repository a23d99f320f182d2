// Imported first by main.tsx. The page's Content-Security-Policy forbids eval: zod (which the
// AI SDK uses to check stream chunks) must not even probe for it, or the browser reports a
// violation.
import { config } from "zod/v4/core";

config({ jitless: true });
