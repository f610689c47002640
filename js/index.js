// precise-ttl-read: hide expired DynamoDB items from AWS SDK v3 reads.
//
// The implementation is CommonJS so that `require` and `import` (index.mjs) share one copy: the
// record of which clients already hide expired items must not exist twice.
"use strict";

const { hideExpired, showExpired } = require("./src/middleware");
const { isExpired } = require("./src/rule");
const { HIDE_EXPIRED, PLACEHOLDERS, PlaceholderClash } = require("./src/operations");

module.exports = { hideExpired, showExpired, isExpired, HIDE_EXPIRED, PLACEHOLDERS, PlaceholderClash };
