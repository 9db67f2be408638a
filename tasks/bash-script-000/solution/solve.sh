#!/bin/bash
mkdir -p /app/scripts && printf '%s\n' '#!/bin/bash' 'IFS="-"; echo "$*"' > /app/scripts/sync_crater.sh && chmod +x /app/scripts/sync_crater.sh
