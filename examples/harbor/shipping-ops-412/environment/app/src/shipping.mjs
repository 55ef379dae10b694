// Shipping cost rules for the checkout.

export const FREE_SHIPPING_THRESHOLD = 50; // EUR
export const STANDARD_SHIPPING_FEE = 4.95; // EUR

/** Shipping fee in EUR for an order ({id, totalEur}): free from the threshold on, the standard fee below it. */
export function shippingFee(order) {
  if (order.totalEur < 0) throw new RangeError(`order ${order.id}: negative total`);
  return order.totalEur >= FREE_SHIPPING_THRESHOLD ? 0 : STANDARD_SHIPPING_FEE;
}
