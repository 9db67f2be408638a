#!/bin/bash
mkdir -p /app/scripts && printf '%s\n' '#!/bin/bash' 'IFS="-"; echo "$*"' > /app/scripts/check_cinder.sh && chmod +x /app/scripts/check_cinder.sh
