// precise-ttl-read for ES modules: the CommonJS implementation, re-exported.
import cjs from "./index.js";

export const { hideExpired, showExpired, isExpired, HIDE_EXPIRED, PLACEHOLDERS, PlaceholderClash } = cjs;
