#!/bin/bash
grep -rl 'tundra-5517' /app/hazel > /app/matches.txt
