#!/bin/bash
mkdir -p /app/scripts && printf '%s\n' '#!/bin/bash' 'for a in "$@"; do echo "${a^^}"; done' > /app/scripts/clean_crow.sh && chmod +x /app/scripts/clean_crow.sh
