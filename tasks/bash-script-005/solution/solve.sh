#!/bin/bash
mkdir -p /app/scripts && printf '%s\n' '#!/bin/bash' 'IFS="-"; echo "$*"' > /app/scripts/save_dragon.sh && chmod +x /app/scripts/save_dragon.sh
