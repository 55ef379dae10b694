/**
 * Names in Engine API paths. dockerode pastes a name into the path unescaped
 * (`/images/<name>/json`, `/containers/<id>/start`, `/networks/<id>`), so a name made of `../`
 * segments would send the request to another path of the endpoint (and the daemon's router
 * answers an unclean path with a redirect). Every name that goes into a path is therefore
 * parsed with its grammar first (src/names.ts) and then escaped segment by segment; a `.` or
 * `..` segment can get through neither. The characters a valid name may have that a path
 * allows as they are (`:`, `@`, `+`) stay as they are, so the paths of valid names are
 * byte for byte what they always were.
 */
import { ConfigError } from '../../../errors.js';
import { imageRef, parseObjectName } from '../../../object-names.js';

function escapeSegments(text: string, what: string): string {
  return text
    .split('/')
    .map((segment) => {
      if (segment === '' || segment === '.' || segment === '..') {
        throw new ConfigError(`${what}: ${JSON.stringify(text)} has an empty, "." or ".." path segment`);
      }
      return encodeURIComponent(segment).replace(/%3A/gi, ':').replace(/%40/g, '@').replace(/%2B/gi, '+');
    })
    .join('/');
}

/** An image reference (or id) as the `<name>` of `/images/<name>/...`. */
export function imageInPath(ref: string): string {
  return escapeSegments(imageRef(ref, 'image'), 'image');
}

/** A container id or name as the `<id>` of `/containers/<id>/...`. */
export function containerInPath(id: string): string {
  return escapeSegments(parseObjectName(id, 'container'), 'container');
}

/** A network id or name as the `<id>` of `/networks/<id>`. */
export function networkInPath(id: string): string {
  return escapeSegments(parseObjectName(id, 'network'), 'network');
}
