"""The admin's delivery-analytics chart pages: `documents` shapes the store's reports into
charts (each with the table that holds the same numbers), `pages` serves them."""
