#!/bin/bash
grep -rl 'falcon-8372' /app/hazel > /app/mesa_matches.txt
