// Types for precise-ttl-read (the implementation is plain JavaScript).

/** Anything with the SDK's middleware stack: a DynamoDBClient or a DynamoDBDocumentClient. */
export interface ClientWithMiddleware {
  middlewareStack: {
    addRelativeTo(middleware: unknown, options: unknown): void;
    identify(): string[];
  };
}

/** A command (e.g. `new QueryCommand(...)` from either package). */
export interface CommandWithMiddleware {
  middlewareStack: { add(middleware: unknown, options: unknown): void };
}

export interface HideExpiredOptions {
  /** The TTL attribute's name. Default `"ttl"`. */
  ttlAttribute?: string;
  /**
   * Epoch seconds (decimals allowed), read once when a request is made and once when its
   * response arrives. Default: `Date.now() / 1000`. Meant for tests.
   */
  clock?: () => number;
}

/**
 * Adds middleware to the client that hides expired items from Query, Scan, GetItem,
 * BatchGetItem, TransactGetItems, ExecuteStatement (SELECT), BatchExecuteStatement and
 * ExecuteTransaction. Returns the same client. Calling it again with the same TTL attribute
 * does nothing; with another one, it throws.
 *
 * A DynamoDBDocumentClient shares the wrapped client's middleware stack, so hiding on either
 * hides on both.
 */
export function hideExpired<C extends ClientWithMiddleware>(client: C, options?: HideExpiredOptions): C;

/** Switches hideExpired off for this command (every send of this command object). Returns it. */
export function showExpired<C extends CommandWithMiddleware>(command: C): C;

export interface IsExpiredOptions {
  /** The TTL attribute's name. Default `"ttl"`. */
  ttlAttribute?: string;
  /** Epoch seconds: a number, a bigint or number text. Default: the system clock. */
  now?: number | bigint | string;
}

/**
 * Whether an item has expired: its TTL attribute is a Number with now − 5 years ≤ ttl ≤ now
 * (5 years = 5 × 365 days). Takes the low-level client's items (`{ ttl: { N: "..." } }`) and the
 * document client's (`{ ttl: 1800000000 }`, a bigint or a NumberValue). Compared exactly, as
 * decimals.
 */
export function isExpired(item: Record<string, unknown> | undefined | null, options?: IsExpiredOptions): boolean;

/** The filter expression hideExpired adds to Query and Scan (its placeholders in PLACEHOLDERS). */
export const HIDE_EXPIRED: string;

export const PLACEHOLDERS: {
  readonly ATTR: "#precise_ttl_attr";
  readonly NUMBER: ":precise_ttl_number";
  readonly OLDEST: ":precise_ttl_oldest";
  readonly NOW: ":precise_ttl_now";
};

/** Thrown (the send rejects) when a request already uses one of hideExpired's placeholders. */
export class PlaceholderClash extends Error {
  name: "PreciseTtlPlaceholderClash";
}
