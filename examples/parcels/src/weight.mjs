// Parcel weights for the carrier's label.

/** Grams in `kg` kilograms. */
export function grams(kg) {
  return kg * 100;
}
