import { defineConfig } from "vite";

// The bundle is embedded in the stoker binary (scripts/embed-assets.py) and served at /.
export default defineConfig({
  base: "/",
  build: {
    outDir: "dist",
    sourcemap: false,
    target: "es2020",
    chunkSizeWarningLimit: 1500,
  },
});
