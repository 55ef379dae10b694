// Checks the rule of OPS-412 and writes /logs/verifier/reward.json: one named value per
// check, and "reward" (1 when every check holds, else 0).
import { writeFileSync } from 'node:fs';

const checks = {};
try {
  const { shippingFee } = await import('/app/src/shipping.mjs');
  checks.free_at_45 = shippingFee({ id: 'a', totalEur: 45 }) === 0 ? 1 : 0;
  checks.free_at_39 = shippingFee({ id: 'b', totalEur: 39 }) === 0 ? 1 : 0;
  checks.fee_below_39 = shippingFee({ id: 'c', totalEur: 38.99 }) === 4.95 ? 1 : 0;
} catch (error) {
  console.error(error);
  checks.loads = 0;
}
const reward = Object.values(checks).every((v) => v === 1) ? 1 : 0;
console.log(JSON.stringify({ reward, ...checks }));
writeFileSync('/logs/verifier/reward.json', JSON.stringify({ reward, ...checks }));
