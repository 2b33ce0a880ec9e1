import { defineConfig } from "vite";

// The HTML report's charts (src/report.ts) as one self-contained script, dist/report.js, which
// the report writer inlines into each report (so a report file works offline). Runs after the
// dashboard's build (vite.config.ts) and keeps its output.
export default defineConfig({
  // Library builds leave process.env alone; the browser has none, and ECharts' debug checks read it.
  define: { "process.env.NODE_ENV": JSON.stringify("production") },
  build: {
    outDir: "dist",
    emptyOutDir: false,
    sourcemap: false,
    target: "es2020",
    chunkSizeWarningLimit: 1500,
    lib: { entry: "src/report.ts", name: "StokerReport", formats: ["iife"], fileName: () => "report.js" },
  },
});
