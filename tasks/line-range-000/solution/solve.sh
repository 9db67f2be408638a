#!/bin/bash
sed -n '2,11p' /app/goblet/grand_daisy.txt > /app/birch_excerpt.txt
