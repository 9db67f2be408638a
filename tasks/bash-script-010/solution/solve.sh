#!/bin/bash
mkdir -p /app/scripts && printf '%s\n' '#!/bin/bash' 'echo $#' > /app/scripts/read_blossom.sh && chmod +x /app/scripts/read_blossom.sh
