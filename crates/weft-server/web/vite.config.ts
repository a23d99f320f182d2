// Builds the page `weft serve` embeds: dist/index.html, dist/assets/index.js and
// dist/assets/index.css. The names carry no hash, so the Rust side can name them with
// include_bytes! (the server marks them no-cache and serves an ETag instead).
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

export default defineConfig({
  plugins: [react()],
  base: "/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    rolldownOptions: {
      output: {
        entryFileNames: "assets/index.js",
        chunkFileNames: "assets/[name].js",
        assetFileNames: "assets/[name][extname]",
        // One script: the server embeds exactly the files named here.
        codeSplitting: false,
      },
    },
  },
  server: {
    // `npm run dev` against a running `weft serve --port 4111`.
    proxy: {
      "/api": "http://127.0.0.1:4111",
      "/threads": "http://127.0.0.1:4111",
      "/assistants": "http://127.0.0.1:4111",
    },
  },
});
